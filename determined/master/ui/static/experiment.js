// One experiment: progress, learning curves, compare trials, hyperparameter views and importance, searcher
// progress, trials (status and why), configuration and model code, controls.
"use strict";

(() => {
  const { el } = det;
  const id = det.config.experimentId;
  const TERMINAL = ["COMPLETED", "CANCELED", "ERROR"];
  const view = {
    exp: null, trials: [], metrics: null, progress: null, importanceKey: null, signature: null,
    compare: new Set(), curve: curves.newView(), samples: [],
  };

  // ---- helpers over the data

  function metricValue(value) { return typeof value === "number" && isFinite(value) ? value : NaN; }
  function bestId() { return view.exp.best_trial_id; }
  function singleTrial() { return view.trials.length <= 1; }

  function colorOf(trialId) {
    const index = view.trials.findIndex((t) => t.id === trialId);
    return curves.PALETTE[(index < 0 ? trialId : index) % curves.PALETTE.length];
  }

  // The master downsamples each trial's curves (keeping every bucket's minimum and maximum, curves.py): a budget
  // of points per metric shared by the trials keeps a page of thousands of trials small and quick to draw.
  function curvePoints() {
    return Math.max(4, Math.min(5000, Math.floor(20000 / Math.max(1, view.trials.length))));
  }

  function series(trials) {
    const config = view.exp.config;
    return trials.map((t) => ({
      id: t.trial_id, label: `Trial ${t.trial_id}`, color: colorOf(t.trial_id), thick: t.trial_id === bestId(),
      groups: { training: t.training, validation: t.validation },
      ctx: { batchSize: Number((t.hparams || {}).global_batch_size) || 1, recordsPerEpoch: config.records_per_epoch || 0,
        start: t.start_time },
    }));
  }

  // ---- header, summary and buttons

  // The elapsed time, and an ETA only once there is evidence of the pace: the run is 30 s old and this page has
  // seen progress advance 3 times over 15 s (the first seconds of a run are start-up, not its pace). The ETA is a
  // range between two paces, the recent one (the last 2 minutes) and the whole run's; `pending` until then.
  function timing() {
    const exp = view.exp;
    const elapsed = exp.start_time ? ((exp.end_time ? new Date(exp.end_time) : new Date()) - new Date(exp.start_time)) / 1000 : null;
    if (TERMINAL.includes(exp.state) || exp.state === "PAUSED") return { elapsed, eta: null, pending: false };
    const samples = view.samples;
    const advances = samples.filter((x, i) => i > 0 && x.p > samples[i - 1].p).length;
    const span = samples.length > 1 ? (samples[samples.length - 1].t - samples[0].t) / 1000 : 0;
    const p = exp.progress || 0;
    if (!(p > 0) || p >= 1 || advances < 3 || span < 15 || !(elapsed >= 30)) return { elapsed, eta: null, pending: true };
    const recent = samples.filter((x) => x.t > Date.now() - 120000);
    const [a, b] = [recent[0], recent[recent.length - 1]];
    const estimates = [(1 - p) * elapsed / p];
    if (recent.length >= 2 && b.p > a.p) estimates.push((1 - b.p) * ((b.t - a.t) / 1000) / (b.p - a.p));
    return { elapsed, eta: [Math.min(...estimates), Math.max(...estimates)], pending: false };
  }

  function etaText([low, high]) {
    const [a, b] = [det.fmtSeconds(low), det.fmtSeconds(high)];
    return a === b || high - low < 0.1 * high ? `ETA ${det.fmtSeconds((low + high) / 2)}` : `ETA ${a} – ${b}`;
  }

  function renderHeader() {
    const exp = view.exp;
    document.getElementById("exp-description").textContent =
      exp.name + (exp.description && exp.description !== exp.name ? ` — ${exp.description}` : "");
    document.getElementById("exp-state").replaceChildren(det.stateBadge(exp.state));
    const searcher = exp.config.searcher;
    const { elapsed, eta, pending } = timing();
    det.fill(document.getElementById("exp-summary"),
      el("span", { id: "exp-progress" }, "Progress ", det.progressBar(exp.progress)),
      el("span", { id: "exp-elapsed" }, `Elapsed ${det.fmtSeconds(elapsed)}`),
      eta !== null ? el("span", { id: "exp-eta", title: "between the recent pace and the whole run's" }, etaText(eta)) : null,
      pending ? el("span", { id: "exp-eta-pending", class: "muted", title: "an ETA needs 30 s of the run and a few progress reports" },
        "ETA estimating…") : null,
      el("span", {}, `Searcher ${searcher.name} on ${exp.searcher_metric} (${exp.smaller_is_better ? "smaller" : "larger"} is better)`),
      el("span", {}, "Best ", exp.best_validation === null ? "none yet" : det.fmtNum(exp.best_validation),
        exp.best_trial_id ? el("a", { href: "/trials/" + exp.best_trial_id }, ` (trial ${exp.best_trial_id})`) : ""),
      el("span", {}, `Trials ${exp.num_trials}`),
      el("span", {}, `Owner ${exp.owner}`),
      el("span", {}, `Started ${det.fmtTime(exp.start_time)}`),
      exp.end_time ? el("span", {}, `Ended ${det.fmtTime(exp.end_time)}`) : null,
      (exp.labels || []).length ? el("span", {}, "Labels " + exp.labels.join(", ")) : null,
    );
    const allowed = det.mayControl(exp.owner);
    document.getElementById("btn-pause").classList.toggle("hidden", !(allowed && exp.state === "ACTIVE"));
    document.getElementById("btn-activate").classList.toggle("hidden", !(allowed && exp.state === "PAUSED"));
    document.getElementById("btn-kill").classList.toggle("hidden", !(allowed && !TERMINAL.includes(exp.state)));
  }

  async function control(action) {
    if (action === "kill" && !window.confirm(`Kill experiment ${id}? Its running trials stop at once.`)) return;
    try {
      view.exp = (await det.api(`/experiments/${id}/${action}`, { method: "POST" })).experiment;
      renderHeader();
    } catch (e) {
      det.showStatus(`Could not ${action} experiment ${id}: ${e.message}`);
    }
  }
  document.getElementById("btn-pause").addEventListener("click", () => control("pause"));
  document.getElementById("btn-activate").addEventListener("click", () => control("activate"));
  document.getElementById("btn-kill").addEventListener("click", () => control("kill"));
  // Open TensorBoard: a running one of this experiment, else a new one (tensorboard.js); where it stands below the title.
  const tbButton = document.getElementById("btn-tensorboard");
  const tbStatus = document.getElementById("tb-status");
  tbButton.addEventListener("click", () => {
    tbButton.disabled = true;
    detTensorBoard.open([id], (text, kind) => {
      tbStatus.textContent = text;
      tbStatus.classList.remove("hidden");
      tbStatus.classList.toggle("error", kind === "error");
    }).catch(() => {}).finally(() => { tbButton.disabled = false; });
  });

  // ---- learning curves and compare

  function quantityNow() {
    const qs = curves.quantities(view.metrics.metric_names);
    return { qs, q: qs.find((q) => q.key === view.curve.metric) };
  }

  function renderCurves() {
    const { qs } = quantityNow();
    curves.controls(document.getElementById("curve-controls"), view.curve, {
      quantities: qs, preferred: curves.quantity(view.exp.searcher_metric), groups: view.metrics.groups,
      epochs: (view.exp.config.records_per_epoch || 0) > 0,
    }, () => { renderCurves(); renderCompare(); });
    const { q } = quantityNow();
    const traces = q ? curves.traces(series(view.metrics.trials), q, view.curve) : [];
    det.plot("learning-curves", traces, curves.layout(q, view.curve, 380, traces));
  }

  function renderCompare() {
    const card = document.getElementById("compare-card");
    const chosen = view.trials.filter((t) => view.compare.has(t.id));
    card.classList.toggle("hidden", chosen.length === 0);
    if (!chosen.length) return;
    document.getElementById("compare-note").textContent =
      `${chosen.length} trial${chosen.length > 1 ? "s" : ""}: ${chosen.map((t) => t.id).join(", ")} · the curves follow the controls above`;
    const { q } = quantityNow();
    const picked = view.metrics.trials.filter((t) => view.compare.has(t.trial_id));
    const compared = q ? curves.traces(series(picked), q, view.curve) : [];
    det.plot("compare-curves", compared, curves.layout(q, view.curve, 340, compared));
    // hyperparameters and results side by side: a row per field, a column per trial
    const flat = Object.fromEntries(chosen.map((t) => [t.id, det.flatten(t.hparams)]));
    const names = [...new Set(chosen.flatMap((t) => Object.keys(flat[t.id])))].sort();
    const differs = (name) => new Set(chosen.map((t) => JSON.stringify(flat[t.id][name]))).size > 1;
    const rows = [
      ["State", (t) => det.stateBadge(t.status || t.state, t.status_reason)],
      ["Batches", (t) => det.fmtNum(t.total_batches)],
      [`Best ${view.exp.searcher_metric}`, (t) => det.fmtNum(t.best_validation)],
      ...names.map((n) => [n, (t) => det.fmtValue(flat[t.id][n]), differs(n)]),
    ];
    const table = el("table", { class: "data compare" },
      el("thead", {}, el("tr", {}, el("th", {}, ""), chosen.map((t) => el("th", { "data-trial": String(t.id) },
        el("a", { href: "/trials/" + t.id, style: { color: colorOf(t.id) } }, `Trial ${t.id}`))))),
      el("tbody", {}, rows.map(([label, cell, diff]) => el("tr", { class: diff ? "differs" : null },
        el("th", {}, label), chosen.map((t) => el("td", {}, cell(t)))))));
    document.getElementById("compare-table").replaceChildren(table);
  }

  document.getElementById("compare-clear").addEventListener("click", () => {
    view.compare.clear();
    renderTrials();
    renderCompare();
  });

  // ---- hyperparameter views

  function logTicks(low, high) {
    const ticks = [];
    for (let e = Math.ceil(low - 1e-9); e <= Math.floor(high + 1e-9); e++) ticks.push(e);
    if (ticks.length < 2) return [low, high];
    return ticks;
  }

  // One parallel-coordinates axis: log hyperparameters on a log10 scale with their values as ticks,
  // categorical ones with a tick per category, numbers on their range.
  function dimension(name, spec, values) {
    if (spec.type === "log") {
      const scale = Math.log10(spec.base || 10);
      const low = spec.minval * scale, high = spec.maxval * scale;
      const ticks = logTicks(low, high);
      return { label: `${name} (log)`, values: values.map((v) => (v > 0 ? Math.log10(v) : NaN)), range: [low, high],
        tickvals: ticks, ticktext: ticks.map((t) => det.fmtNum(Number(Math.pow(10, t).toPrecision(6)))) };
    }
    if (spec.type === "categorical") {
      const cats = (spec.vals || []).map((v) => JSON.stringify(v));
      return { label: name, values: values.map((v) => cats.indexOf(JSON.stringify(v))), range: [0, Math.max(1, cats.length - 1)],
        tickvals: cats.map((_, i) => i), ticktext: (spec.vals || []).map((v) => det.fmtValue(v)) };
    }
    const range = typeof spec.minval === "number" && typeof spec.maxval === "number" ? [spec.minval, spec.maxval] : undefined;
    return { label: name, values: values.map(metricValue), range };
  }

  function renderHparams() {
    const exp = view.exp;
    const single = singleTrial();
    document.getElementById("single-trial-note").classList.toggle("hidden", !single);
    document.getElementById("hparam-views").classList.toggle("hidden", single);
    document.getElementById("scatter-card").classList.toggle("hidden", single);
    if (single) return;
    const searched = det.searchedHparams(exp);
    const trials = view.trials;
    const metric = trials.map((t) => metricValue(t.best_validation));
    const dims = searched.map(({ name, path, spec }) => dimension(name, spec, trials.map((t) => det.hparamValue(t.hparams, path))));
    dims.push({ label: exp.searcher_metric, values: metric });
    const finite = metric.filter((v) => !isNaN(v));
    det.plot("hp-parcoords", [{
      type: "parcoords", dimensions: dims, meta: trials.map((t) => t.id),
      line: { color: metric.map((v) => (isNaN(v) ? (finite.length ? Math.max(...finite) : 0) : v)),
        colorscale: "Viridis", reversescale: !exp.smaller_is_better, showscale: true },
    }], { height: 360, margin: { l: 60, r: 60, t: 50, b: 30 } });

    document.getElementById("scatter-metric").textContent = exp.searcher_metric;
    const row = document.getElementById("hp-scatter");
    const wanted = searched.map((s) => s.name);
    if (row.dataset.names !== wanted.join("|")) {
      row.replaceChildren(...wanted.map((n) => el("div", { class: "scatter-plot", "data-hparam": n })));
      if (!wanted.length) row.append(el("p", { class: "muted" }, "No hyperparameter is searched (all are constant)."));
      row.dataset.names = wanted.join("|");
    }
    const withMetric = trials.filter((t) => !isNaN(metricValue(t.best_validation)));
    for (const div of row.querySelectorAll(".scatter-plot")) {
      const name = div.dataset.hparam;
      const { path, spec } = searched.find((s) => s.name === name);
      det.plot(div, [{
        type: "scatter", mode: "markers", x: withMetric.map((t) => det.hparamValue(t.hparams, path)),
        y: withMetric.map((t) => t.best_validation), text: withMetric.map((t) => `trial ${t.id}`),
        marker: { size: 8, color: withMetric.map((t) => (t.id === exp.best_trial_id ? "#d62728" : "#1f77b4")) },
      }], { height: 260, margin: { l: 55, r: 10, t: 10, b: 45 },
        xaxis: { title: { text: name }, type: spec.type === "log" ? "log" : spec.type === "categorical" ? "category" : undefined,
          categoryorder: spec.type === "categorical" ? "array" : undefined,
          categoryarray: spec.type === "categorical" ? spec.vals : undefined },
        yaxis: { title: { text: exp.searcher_metric } } });
    }
  }

  async function refreshImportance() {
    if (singleTrial()) return;
    const key = view.trials.map((t) => `${t.id}:${t.best_validation}`).join(",");
    if (key === view.importanceKey) return;
    view.importanceKey = key;
    const answer = await det.api(`/experiments/${id}/hyperparameter_importance`);
    const entries = Object.entries(answer.importance).sort((a, b) => a[1] - b[1]);
    const note = document.getElementById("importance-note");
    note.textContent = entries.length ? `share of ${answer.metric}'s variance each explains alone, over ${answer.num_trials} trials`
      : `needs at least ${answer.min_trials} trials with ${answer.metric} and a searched hyperparameter`;
    det.plot("hp-importance", [{ type: "bar", orientation: "h", x: entries.map((e) => e[1]), y: entries.map((e) => e[0]),
      marker: { color: "#2ca02c" } }], { height: 360, margin: { l: 120, r: 20, t: 20, b: 40 },
      xaxis: { range: [0, 1], title: { text: "importance" } } });
  }

  // ---- searcher progress

  function renderProgress() {
    const p = view.progress;
    document.getElementById("searcher-note").textContent =
      `${p.name}, ${Math.round(p.progress * 1000) / 10}% · ` + Object.entries(p.trials_by_state).map(([s, n]) => `${n} ${s}`).join(", ");
    const chart = document.getElementById("searcher-progress");
    chart.classList.toggle("hidden", singleTrial());
    const rows = [];
    p.brackets.forEach((bracket, b) => bracket.rungs.forEach((rung) => rows.push({
      bracket: b + 1, rung: rung.index + 1, length: rung.length, reported: rung.reported.length,
      promoted: rung.promoted, training: rung.in_progress.length,
      trials: rung.reported.map((r) => r.trial_id).concat(rung.in_progress),
    })));
    if (!singleTrial()) {
      const labels = [], promoted = [], reported = [], running = [];
      p.brackets.forEach((bracket, b) => bracket.rungs.forEach((rung) => {
        labels.push((p.brackets.length > 1 ? `bracket ${b + 1} ` : "") + `rung ${rung.index + 1} (${rung.length} ${p.unit})`);
        promoted.push(rung.promoted);
        reported.push(rung.reported.length - rung.promoted);
        running.push(rung.in_progress.length);
      }));
      det.plot(chart, [
        { type: "bar", name: "promoted", x: labels, y: promoted, marker: { color: "#2ca02c" } },
        { type: "bar", name: "reported", x: labels, y: reported, marker: { color: "#1f77b4" } },
        { type: "bar", name: "training", x: labels, y: running, marker: { color: "#ff7f0e" } },
      ], { barmode: "stack", height: 300, yaxis: { title: { text: "trials" } } });
    }
    det.sortableTable(document.getElementById("searcher-rungs"), [
      ...(p.brackets.length > 1 ? [{ key: "bracket", label: "Bracket" }] : []),
      { key: "rung", label: "Rung" }, { key: "length", label: `Length (${p.unit})` },
      { key: "reported", label: "Reported" }, { key: "promoted", label: "Promoted" }, { key: "training", label: "Training" },
      { key: "trials", label: "Trials", value: (r) => r.trials.length,
        cell: (r) => el("span", { class: "chips" }, r.trials.filter((t) => t !== null).map((t) => el("a", { href: "/trials/" + t, class: "chip" }, String(t)))) },
    ], rows);
  }

  // ---- trials table

  function renderTrials() {
    const exp = view.exp;
    const searched = det.searchedHparams(exp);
    const latestTraining = {}, lastReport = {};
    for (const t of view.metrics.trials) {
      latestTraining[t.trial_id] = (t.training[t.training.length - 1] || {}).metrics || {};
      lastReport[t.trial_id] = det.lastReport(t.training, t.validation);
    }
    const seconds = (t) => det.trialSeconds(t, lastReport[t.id]);
    const columns = [
      { key: "id", label: "Trial", pinned: true, value: (t) => t.id,
        cell: (t) => el("a", { href: "/trials/" + t.id }, String(t.id) + (t.id === exp.best_trial_id ? " ★" : "")) },
      { key: "state", label: "State", pinned: true, value: (t) => t.status || t.state,
        cell: (t) => det.stateBadge(t.status || t.state, t.status_reason) },
      { key: "reason", label: "Why", optional: true, value: (t) => t.status_reason || "",
        cell: (t) => el("span", { class: "reason", title: t.status_reason || "" }, t.status_reason || "") },
      { key: "total_batches", label: "Batches", numeric: true },
      { key: "best", label: `Best ${exp.searcher_metric}`, value: (t) => t.best_validation, numeric: true },
      ...searched.map(({ name, path }) => ({ key: "hp:" + name, label: name, optional: "hparam", numeric: true,
        value: (t) => det.hparamValue(t.hparams, path) })),
      ...view.metrics.metric_names.validation.filter((n) => n !== exp.searcher_metric).map((n) => ({
        key: "val:" + n, label: n, optional: "metric", numeric: true, value: (t) => (t.latest_validation || {})[n] })),
      ...view.metrics.metric_names.training.map((n) => ({ key: "train:" + n, label: `training ${n}`, optional: "metric",
        numeric: true, value: (t) => latestTraining[t.id] && latestTraining[t.id][n] })),
      { key: "restarts", label: "Restarts", optional: true, numeric: true },
      { key: "start", label: "Started", optional: true, value: (t) => t.start_time || "", cell: (t) => det.fmtTime(t.start_time) },
      { key: "duration", label: "Duration", numeric: true, className: "duration", value: seconds,
        title: "from its first run's start until it stopped training (now, while it runs)",
        cell: (t) => det.fmtSeconds(seconds(t)) },
    ];
    det.sortableTable(document.getElementById("trials-table"), columns, view.trials, undefined, {
      name: "trials", select: {
        has: (t) => view.compare.has(t.id),
        set: (t, checked) => { if (checked) view.compare.add(t.id); else view.compare.delete(t.id); renderCompare(); },
      },
    });
  }

  // ---- configuration and model code (they do not change: read once)

  let codeFiles = null;
  async function renderConfigAndCode() {
    document.getElementById("exp-config").textContent = det.yamlText(view.exp.config);
    if (codeFiles) return;
    codeFiles = await det.api(`/experiments/${id}/model_files`);
    const picker = document.getElementById("code-file");
    det.fill(picker, codeFiles.files.map((f) => el("option", { value: f.path }, `${f.path} (${det.fmtBytes(f.size)})`)));
    const entry = String(view.exp.config.entrypoint || "").split(":")[0].replace(/\./g, "/") + ".py";
    const first = codeFiles.files.find((f) => f.path === entry) || codeFiles.files.find((f) => f.text !== null) || codeFiles.files[0];
    const show = () => {
      const file = codeFiles.files.find((f) => f.path === picker.value);
      document.getElementById("exp-code").textContent = file && file.text !== null ? file.text : "";
      document.getElementById("code-note").textContent = !file ? "No files." : file.text === null
        ? `${file.path} is binary or too big to show (${det.fmtBytes(file.size)}).` : "";
    };
    picker.addEventListener("change", show);
    if (first) picker.value = first.path;
    show();
  }

  // ---- polling

  let round = 0;
  async function refresh() {
    const [described, metrics, progress] = await Promise.all([
      det.api(`/experiments/${id}`), det.api(`/experiments/${id}/metrics?max_points=${curvePoints()}`), det.api(`/experiments/${id}/searcher_progress`)]);
    view.samples.push({ t: Date.now(), p: described.experiment.progress });
    if (view.samples.length > 600) view.samples.shift();
    const signature = JSON.stringify([described, metrics, progress]);
    if (signature === view.signature) { renderHeader(); return true; } // nothing changed: leave the charts alone
    view.signature = signature;
    view.exp = described.experiment;
    view.trials = described.trials;
    view.metrics = metrics;
    view.progress = progress;
    document.title = `Experiment ${id} · ${view.exp.state} · Determined`;
    renderHeader();
    renderCurves();
    renderHparams();
    renderProgress();
    renderTrials();
    renderCompare();
    await renderConfigAndCode();
    if (round++ % 3 === 0 || TERMINAL.includes(view.exp.state)) await refreshImportance();
    return true;
  }

  det.ready().then(() => det.poll(refresh, 2000, { notFound: `Experiment ${id}` })).catch(() => {});
})();
