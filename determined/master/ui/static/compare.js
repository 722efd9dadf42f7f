// Compare trials of several experiments: pick experiments (`?experiments=1,2`), tick their trials (`&trials=3,9`),
// choose a metric (`&metric=validation:validation_loss`): the ticked trials' learning curves overlaid on one chart,
// and a table of their hyperparameters and best validation side by side (hyperparameters that differ between the
// ticked trials are marked). Reads GET /experiments/{id} and GET /experiments/{id}/metrics, as the experiment page.
"use strict";

(() => {
  const { el } = det;
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  const params = new URLSearchParams(location.search);
  const ids = (text) => Array.from(new Set(String(text || "").split(",").map((s) => Number(s.trim())).filter((n) => Number.isInteger(n) && n > 0)));
  const state = {
    experiments: ids(params.get("experiments")), // chosen experiment ids, in order
    loaded: new Map(), // id -> {exp, metrics}
    ticked: params.has("trials") ? new Set(ids(params.get("trials"))) : null, // null: the default (best 5 of each)
    metric: params.get("metric") || "",
    errors: new Map(), // id -> the master's refusal
  };
  const addSelect = document.getElementById("compare-add");
  const metricSelect = document.getElementById("compare-metric");
  const logBox = document.getElementById("compare-log");
  const message = document.getElementById("compare-message");

  function saveUrl() {
    const url = new URL(location.href);
    url.searchParams.set("experiments", state.experiments.join(","));
    if (state.ticked) url.searchParams.set("trials", Array.from(state.ticked).sort((a, b) => a - b).join(","));
    else url.searchParams.delete("trials");
    if (state.metric) url.searchParams.set("metric", state.metric); else url.searchParams.delete("metric");
    history.replaceState(null, "", url);
  }

  // Every trial of the loaded experiments: {id, experiment, exp, trial (the metrics answer's), color}.
  function rows() {
    const out = [];
    for (const eid of state.experiments) {
      const entry = state.loaded.get(eid);
      if (!entry) continue;
      for (const t of entry.metrics.trials) out.push({ id: t.trial_id, experiment: eid, exp: entry.exp, trial: t });
    }
    out.forEach((r, i) => { r.color = PALETTE[i % PALETTE.length]; });
    return out;
  }

  // The default ticks: the five best trials of each experiment by its searcher metric.
  function defaultTicks() {
    const ticked = new Set();
    for (const eid of state.experiments) {
      const entry = state.loaded.get(eid);
      if (!entry) continue;
      const sign = entry.exp.smaller_is_better ? 1 : -1;
      const best = entry.metrics.trials.slice().sort((a, b) => {
        const x = a.best_validation, y = b.best_validation;
        if (x === null || y === null) return (x === null) - (y === null);
        return sign * (x - y);
      });
      best.slice(0, 5).forEach((t) => ticked.add(t.trial_id));
    }
    return ticked;
  }

  function ticked() { return state.ticked || defaultTicks(); }

  function metricChoices() {
    const names = { training: new Set(), validation: new Set() };
    for (const { metrics } of state.loaded.values()) {
      for (const group of ["validation", "training"]) (metrics.metric_names[group] || []).forEach((n) => names[group].add(n));
    }
    return ["validation", "training"].flatMap((g) => Array.from(names[g]).sort().map((n) => `${g}:${n}`));
  }

  function renderPickers(all) {
    const chosen = new Set(state.experiments);
    det.fill(addSelect, el("option", { value: "" }, "Add an experiment…"),
      all.filter((e) => !chosen.has(e.id)).sort((a, b) => b.id - a.id)
        .map((e) => el("option", { value: String(e.id) }, `${e.id} ${e.name || e.description || ""}`.trim())));
    const choices = metricChoices();
    if (!choices.includes(state.metric)) {
      const searcher = state.experiments.map((id) => state.loaded.get(id)).find(Boolean);
      const preferred = searcher ? `validation:${searcher.exp.searcher_metric}` : "";
      state.metric = choices.includes(preferred) ? preferred : choices[0] || "";
    }
    det.fill(metricSelect, choices.map((c) => el("option", { value: c }, c.replace(":", ": "))));
    metricSelect.value = state.metric;
    det.fill(document.getElementById("compare-chosen"), state.experiments.map((id) => {
      const entry = state.loaded.get(id);
      const label = entry ? `Experiment ${id} ${entry.exp.name || ""}` : `Experiment ${id}`;
      return el("span", { class: "chip", "data-experiment": String(id) },
        el("a", { href: "/experiments/" + id }, label.trim()),
        el("button", { type: "button", title: "Remove", "aria-label": `remove experiment ${id}`, onclick: () => remove(id) }, "×"));
    }));
    const problems = Array.from(state.errors.entries()).map(([id, text]) => `Experiment ${id}: ${text}`);
    message.textContent = problems.join(" · ") || (state.experiments.length ? "" : "Add experiments to compare their trials.");
    message.className = "edit-message" + (problems.length ? " refused" : "");
  }

  function lastValue(points, name) {
    for (let i = points.length - 1; i >= 0; i--) {
      const v = points[i].metrics[name];
      if (typeof v === "number") return v;
    }
    return null;
  }

  function renderChart(list) {
    const [group, name] = state.metric.split(/:(.*)/s);
    const chosen = list.filter((r) => ticked().has(r.id));
    const traces = chosen.map((r) => {
      const points = (r.trial[group] || []).filter((p) => typeof p.metrics[name] === "number");
      return { type: "scatter", mode: group === "validation" ? "lines+markers" : "lines", name: `E${r.experiment} trial ${r.id}`,
        meta: { trial: r.id, experiment: r.experiment }, x: points.map((p) => p.steps_completed), y: points.map((p) => p.metrics[name]),
        line: { color: r.color, width: 2 }, marker: { size: 4 } };
    }).filter((t) => t.x.length);
    document.getElementById("compare-note").textContent = name
      ? `${name} (${group}) of ${traces.length} trial(s)` + (chosen.length > traces.length ? `; ${chosen.length - traces.length} ticked did not report it` : "")
      : "";
    det.plot(document.getElementById("compare-chart"), traces, {
      xaxis: { title: { text: "batches" }, automargin: true }, yaxis: { title: { text: name || "" }, type: logBox.checked ? "log" : "linear", automargin: true },
      showlegend: true, legend: { orientation: "h", y: -0.25 }, autosize: true, // the height is edit.css's
    });
  }

  function renderTable(list) {
    const [group, name] = state.metric.split(/:(.*)/s);
    const chosen = list.filter((r) => ticked().has(r.id));
    const hparams = new Map(); // dotted name -> Set of values among ticked trials
    for (const r of list) for (const key of Object.keys(det.flatten(r.trial.hparams))) if (!hparams.has(key)) hparams.set(key, new Set());
    for (const r of chosen) {
      const flat = det.flatten(r.trial.hparams);
      for (const key of hparams.keys()) hparams.get(key).add(JSON.stringify(flat[key] === undefined ? null : flat[key]));
    }
    const differs = (key) => chosen.length > 1 && hparams.get(key).size > 1;
    const columns = [
      { key: "experiment", label: "Experiment", pinned: true, value: (r) => r.experiment,
        cell: (r) => el("a", { href: "/experiments/" + r.experiment }, String(r.experiment)) },
      { key: "trial", label: "Trial", pinned: true, value: (r) => r.id,
        cell: (r) => el("a", { href: "/trials/" + r.id, style: { borderLeft: `4px solid ${r.color}`, paddingLeft: "4px" } }, String(r.id)) },
      { key: "state", label: "State", value: (r) => r.trial.state, cell: (r) => det.stateBadge(r.trial.state) },
      { key: "best", label: "Best validation", value: (r) => r.trial.best_validation, numeric: true,
        cell: (r) => (r.trial.best_validation === null ? "" : `${r.exp.searcher_metric} ${det.fmtNum(r.trial.best_validation)}`) },
      { key: "last", label: name ? `Last ${name}` : "Last", value: (r) => (name ? lastValue(r.trial[group] || [], name) : null), numeric: true,
        cell: (r) => det.fmtNum(name ? lastValue(r.trial[group] || [], name) : null) },
      { key: "batches", label: "Batches", value: (r) => r.trial.total_batches, numeric: true },
      ...Array.from(hparams.keys()).sort().map((key) => ({
        // the ones that differ stay in view longest (a table too wide collapses the others into one column first)
        key: "hp:" + key, label: key, optional: differs(key) ? "metric" : "hparam",
        title: differs(key) ? "differs between the ticked trials (marked)" : "the same in every ticked trial",
        value: (r) => det.flatten(r.trial.hparams)[key],
        cell: (r) => { const v = det.fmtValue(det.flatten(r.trial.hparams)[key]); return differs(key) && ticked().has(r.id) ? el("span", { class: "differs" }, v) : v; },
      })),
    ];
    det.sortableTable(document.getElementById("compare-trials"), columns, list, { key: "best" }, {
      name: "compare-trials", empty: state.experiments.length ? "No trials yet." : "Add experiments to compare their trials.",
      select: {
        has: (r) => ticked().has(r.id),
        set: (r, on) => { const now = new Set(ticked()); if (on) now.add(r.id); else now.delete(r.id); state.ticked = now; saveUrl(); render(); },
      },
    });
  }

  let all = [];
  function render() {
    const list = rows();
    renderPickers(all);
    renderChart(list);
    renderTable(list);
  }

  async function load(id) {
    try {
      const [d, metrics] = await Promise.all([det.api(`/experiments/${id}`), det.api(`/experiments/${id}/metrics?max_points=500`)]);
      state.loaded.set(id, { exp: d.experiment, metrics });
      state.errors.delete(id);
    } catch (e) {
      state.errors.set(id, e.message);
    }
  }

  function remove(id) {
    if (state.ticked) {
      const gone = new Set(((state.loaded.get(id) || {}).metrics || { trials: [] }).trials.map((t) => t.trial_id));
      state.ticked = new Set(Array.from(state.ticked).filter((t) => !gone.has(t)));
    }
    state.experiments = state.experiments.filter((x) => x !== id);
    state.loaded.delete(id);
    state.errors.delete(id);
    saveUrl();
    render();
  }

  addSelect.addEventListener("change", async () => {
    const id = Number(addSelect.value);
    if (!id) return;
    state.experiments.push(id);
    await load(id);
    if (state.ticked) { // tick the new experiment's best trials too
      const entry = state.loaded.get(id);
      if (entry) defaultTicks().forEach((t) => { if (entry.metrics.trials.some((x) => x.trial_id === t)) state.ticked.add(t); });
    }
    saveUrl();
    render();
  });
  metricSelect.addEventListener("change", () => { state.metric = metricSelect.value; saveUrl(); render(); });
  logBox.addEventListener("change", render);

  det.ready().then(async () => {
    all = (await det.api("/experiments")).experiments;
    await Promise.all(state.experiments.map(load));
    render();
    saveUrl();
  }).catch((e) => { message.textContent = "Could not read the master: " + e.message; message.className = "edit-message refused"; });
})();
