// One experiment: learning curves, hyperparameter views and importance, searcher progress, trials, controls.
"use strict";

(() => {
  const { el } = det;
  const id = window.DET_UI.experimentId;
  const TERMINAL = ["COMPLETED", "CANCELED", "ERROR"];
  const picker = document.getElementById("metric-picker");
  const view = { exp: null, trials: [], metrics: null, progress: null, importanceKey: null };

  // ---- helpers over the data

  // The searched hyperparameters, nested ones under dotted names (the master lists them with their paths).
  function searchedHparams(exp) { return (exp.searched_hparams || []).map((h) => h.name); }

  function hparamSpec(exp, name) { return (exp.searched_hparams || []).find((h) => h.name === name) || {}; }

  function hparamValue(exp, trial, name) {
    const path = hparamSpec(exp, name).path || [name];
    return path.reduce((v, key) => (v !== null && typeof v === "object" ? v[key] : undefined), trial.hparams);
  }

  function better(a, b) { // is a better than b for the searcher metric
    if (b === null || b === undefined) return true;
    return view.exp.smaller_is_better ? a < b : a > b;
  }

  function metricValue(value) { return typeof value === "number" && isFinite(value) ? value : NaN; }

  // ---- header, summary and buttons

  function renderHeader() {
    const exp = view.exp;
    document.getElementById("exp-description").textContent =
      exp.name + (exp.description && exp.description !== exp.name ? ` — ${exp.description}` : "");
    document.getElementById("exp-state").replaceChildren(det.stateBadge(exp.state));
    const searcher = exp.config.searcher;
    det.fill(document.getElementById("exp-summary"),
      el("span", {}, "Progress ", det.progressBar(exp.progress)),
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

  // ---- learning curves

  function renderPicker() {
    const names = view.metrics.metric_names;
    const options = [...names.validation.map((n) => "validation:" + n), ...names.training.map((n) => "training:" + n)];
    const current = picker.value;
    const existing = Array.from(picker.options).map((o) => o.value);
    if (options.join("|") !== existing.join("|")) {
      picker.replaceChildren(...options.map((o) => el("option", { value: o }, o.replace(":", ": "))));
      const preferred = "validation:" + view.exp.searcher_metric;
      picker.value = options.includes(current) ? current : options.includes(preferred) ? preferred : options[0] || "";
    }
  }

  function renderCurves() {
    const [kind, name] = (picker.value || ":").split(/:(.*)/s);
    const best = view.exp.best_trial_id;
    const traces = view.metrics.trials.map((t) => {
      const points = (t[kind] || []).filter((p) => name in p.metrics);
      const isBest = t.trial_id === best;
      return {
        type: "scatter", mode: points.length === 1 ? "markers" : "lines+markers",
        name: `Trial ${t.trial_id}` + (isBest ? " (best)" : ""), meta: t.trial_id,
        x: points.map((p) => p.steps_completed), y: points.map((p) => p.metrics[name]),
        line: { width: isBest ? 4 : 1.5 }, marker: { size: isBest ? 7 : 4 }, opacity: best && !isBest ? 0.55 : 1,
      };
    });
    det.plot("learning-curves", traces, {
      height: 380, xaxis: { title: { text: "batches" } }, yaxis: { title: { text: name || "" } },
      legend: { orientation: "v" }, uirevision: picker.value,
    });
  }
  picker.addEventListener("change", renderCurves);

  // ---- hyperparameter views

  function dimension(name, values) {
    if (values.every((v) => typeof v === "number" || v === null || v === undefined)) {
      return { label: name, values: values.map(metricValue) };
    }
    const categories = [...new Set(values.map((v) => JSON.stringify(v)))];
    return { label: name, values: values.map((v) => categories.indexOf(JSON.stringify(v))),
      tickvals: categories.map((_, i) => i), ticktext: categories.map((c) => c.replace(/^"|"$/g, "")) };
  }

  function renderHparams() {
    const exp = view.exp;
    const names = searchedHparams(exp);
    const trials = view.trials;
    const metric = trials.map((t) => metricValue(t.best_validation));
    const dims = [{ label: "trial", values: trials.map((t) => t.id) }];
    for (const name of names) dims.push(dimension(name, trials.map((t) => hparamValue(exp, t, name))));
    dims.push({ label: exp.searcher_metric, values: metric });
    const finite = metric.filter((v) => !isNaN(v));
    det.plot("hp-parcoords", [{
      type: "parcoords", dimensions: dims, meta: trials.map((t) => t.id),
      line: { color: metric.map((v) => (isNaN(v) ? (finite.length ? Math.max(...finite) : 0) : v)),
        colorscale: "Viridis", reversescale: !exp.smaller_is_better, showscale: true },
    }], { height: 360, margin: { l: 60, r: 60, t: 40, b: 30 } });

    document.getElementById("scatter-metric").textContent = exp.searcher_metric;
    const row = document.getElementById("hp-scatter");
    const wanted = names.length ? names : [];
    if (row.dataset.names !== wanted.join("|")) {
      row.replaceChildren(...wanted.map((n) => el("div", { class: "scatter-plot", "data-hparam": n })));
      if (!wanted.length) row.append(el("p", { class: "muted" }, "No hyperparameter is searched (all are constant)."));
      row.dataset.names = wanted.join("|");
    }
    const withMetric = trials.filter((t) => !isNaN(metricValue(t.best_validation)));
    for (const div of row.querySelectorAll(".scatter-plot")) {
      const name = div.dataset.hparam;
      const spec = hparamSpec(exp, name);
      det.plot(div, [{
        type: "scatter", mode: "markers", x: withMetric.map((t) => hparamValue(exp, t, name)), y: withMetric.map((t) => t.best_validation),
        text: withMetric.map((t) => `trial ${t.id}`), marker: { size: 8,
          color: withMetric.map((t) => (t.id === exp.best_trial_id ? "#d62728" : "#1f77b4")) },
      }], { height: 260, margin: { l: 55, r: 10, t: 10, b: 45 },
        xaxis: { title: { text: name }, type: spec && spec.type === "log" ? "log" : undefined },
        yaxis: { title: { text: exp.searcher_metric } } });
    }
  }

  async function refreshImportance() {
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
      `${p.name}, ${Math.round(p.progress * 100)}% · ` + Object.entries(p.trials_by_state).map(([s, n]) => `${n} ${s}`).join(", ");
    const labels = [], promoted = [], reported = [], running = [];
    p.brackets.forEach((bracket, b) => bracket.rungs.forEach((rung) => {
      labels.push((p.brackets.length > 1 ? `bracket ${b + 1} ` : "") + `rung ${rung.index + 1} (${rung.length} ${p.unit})`);
      promoted.push(rung.promoted);
      reported.push(rung.reported.length - rung.promoted);
      running.push(rung.in_progress.length);
    }));
    det.plot("searcher-progress", [
      { type: "bar", name: "promoted", x: labels, y: promoted, marker: { color: "#2ca02c" } },
      { type: "bar", name: "reported", x: labels, y: reported, marker: { color: "#1f77b4" } },
      { type: "bar", name: "training", x: labels, y: running, marker: { color: "#ff7f0e" } },
    ], { barmode: "stack", height: 300, yaxis: { title: { text: "trials" } } });
    const rows = [];
    p.brackets.forEach((bracket, b) => bracket.rungs.forEach((rung) => rows.push({
      bracket: b + 1, rung: rung.index + 1, length: rung.length, reported: rung.reported.length,
      promoted: rung.promoted, training: rung.in_progress.length,
      trials: rung.reported.map((r) => r.trial_id).concat(rung.in_progress),
    })));
    det.sortableTable(document.getElementById("searcher-rungs"), [
      ...(p.brackets.length > 1 ? [{ key: "bracket", label: "Bracket" }] : []),
      { key: "rung", label: "Rung" }, { key: "length", label: `Length (${p.unit})` },
      { key: "reported", label: "Reported" }, { key: "promoted", label: "Promoted" }, { key: "training", label: "Training" },
      { key: "trials", label: "Trials", value: (r) => r.trials.length,
        cell: (r) => el("span", {}, r.trials.filter((t) => t !== null).map((t) => el("a", { href: "/trials/" + t, class: "chip" }, String(t)))) },
    ], rows);
  }

  // ---- trials table

  function renderTrials() {
    const exp = view.exp;
    const names = searchedHparams(exp);
    const latestTraining = {};
    for (const t of view.metrics.trials) latestTraining[t.trial_id] = (t.training[t.training.length - 1] || {}).metrics || {};
    const columns = [
      { key: "id", label: "Trial", value: (t) => t.id, cell: (t) => el("a", { href: "/trials/" + t.id }, String(t.id) + (t.id === exp.best_trial_id ? " ★" : "")) },
      { key: "state", label: "State", cell: (t) => det.stateBadge(t.state) },
      { key: "total_batches", label: "Batches" },
      { key: "restarts", label: "Restarts" },
      ...names.map((n) => ({ key: "hp:" + n, label: n, value: (t) => hparamValue(exp, t, n) })),
      { key: "best", label: `best ${exp.searcher_metric}`, value: (t) => t.best_validation },
      ...view.metrics.metric_names.validation.map((n) => ({ key: "val:" + n, label: `val ${n}`,
        value: (t) => (t.latest_validation || {})[n] })),
      ...view.metrics.metric_names.training.map((n) => ({ key: "train:" + n, label: `train ${n}`,
        value: (t) => latestTraining[t.id] && latestTraining[t.id][n] })),
      { key: "duration", label: "Duration", value: (t) => new Date(t.end_time || Date.now()) - new Date(t.start_time),
        cell: (t) => det.fmtDuration(t.start_time, t.end_time) },
    ];
    det.sortableTable(document.getElementById("trials-table"), columns, view.trials);
  }

  // ---- polling

  let round = 0;
  async function refresh() {
    const [described, metrics, progress] = await Promise.all([
      det.api(`/experiments/${id}`), det.api(`/experiments/${id}/metrics`), det.api(`/experiments/${id}/searcher_progress`)]);
    const signature = JSON.stringify([described, metrics, progress]);
    if (signature === view.signature) return true; // nothing changed: leave the charts alone
    view.signature = signature;
    view.exp = described.experiment;
    view.trials = described.trials;
    view.metrics = metrics;
    view.progress = progress;
    document.title = `Experiment ${id} · ${view.exp.state} · Determined`;
    renderHeader();
    renderPicker();
    renderCurves();
    renderHparams();
    renderProgress();
    renderTrials();
    if (round++ % 3 === 0 || TERMINAL.includes(view.exp.state)) await refreshImportance();
    return true;
  }

  det.ready().then(() => det.poll(refresh, 3000)).catch(() => {});
})();
