// One trial: its status and why, metric charts (training and validation of a quantity together), hyperparameters,
// checkpoints with download / copy / register, and the logs, followed live.
"use strict";

(() => {
  const { el } = det;
  const id = det.config.trialId;
  const TERMINAL = ["COMPLETED", "CANCELED", "ERROR"];
  const logs = document.getElementById("logs");
  const follow = document.getElementById("follow-logs");
  const view = curves.newView();
  let logOffset = 0;
  let lastSignature = "";
  let data = null;
  let experiment = null;

  function renderSummary(t, d) {
    document.getElementById("trial-experiment").replaceChildren("of ",
      el("a", { href: "/experiments/" + t.experiment_id }, `experiment ${t.experiment_id}`));
    document.getElementById("trial-state").replaceChildren(det.stateBadge(t.status || t.state, t.status_reason));
    document.getElementById("trial-reason").textContent = t.status_reason ? `${t.status || t.state}: ${t.status_reason}` : "";
    det.fill(document.getElementById("trial-summary"),
      el("span", {}, `Batches ${det.fmtNum(t.total_batches)}`),
      el("span", {}, `Best validation ${t.best_validation === null ? "none yet" : det.fmtNum(t.best_validation)}`),
      el("span", {}, `Restarts ${t.restarts}`),
      el("span", {}, `Seed ${t.seed}`),
      el("span", { id: "trial-started" }, `Started ${t.start_time ? det.fmtTime(t.start_time) : "not yet"}`),
      t.end_time ? el("span", { id: "trial-ended" }, `Ended ${det.fmtTime(t.end_time)}`) : null,
      t.start_time ? el("span", { id: "trial-duration", title: "from its first run's start until it stopped training (now, while it runs)" },
        `Duration ${det.fmtSeconds(det.trialSeconds(t, det.lastReport(d.training_metrics, d.validation_metrics)))}`) : null,
      t.warm_start_checkpoint_uuid ? el("span", {}, `Started from checkpoint ${t.warm_start_checkpoint_uuid}`) : null,
      t.log_policy_matched ? el("span", {}, `Log policy matched: ${t.log_policy_matched}`) : null,
      t.runner_status ? el("span", {}, `Status: ${t.runner_status}`) : null,
    );
    document.title = `Trial ${id} · ${t.status || t.state} · Determined`;
  }

  function figure(name) {
    return el("figure", { class: "metric-figure" }, el("h3", {}, name), el("div", { class: "metric-chart", "data-metric": name }));
  }

  function renderCharts() {
    const names = { training: new Set(), validation: new Set() };
    for (const [group, rows] of [["training", data.training_metrics], ["validation", data.validation_metrics]]) {
      for (const row of rows) for (const [k, v] of Object.entries(row.metrics || {})) if (typeof v === "number") names[group].add(k);
    }
    const qs = curves.quantities({ training: [...names.training], validation: [...names.validation] });
    curves.controls(document.getElementById("trial-controls"), view, {
      metricPicker: false, groups: ["training", "validation"], epochs: ((experiment || {}).config || {}).records_per_epoch > 0,
    }, renderCharts);
    const box = document.getElementById("trial-charts");
    const keys = qs.map((q) => q.key);
    if (box.dataset.names !== keys.join("|")) { // a title above each chart, where plotly's toolbar cannot cover it
      box.replaceChildren(...keys.map((k) => figure(k)));
      if (!keys.length) box.append(el("p", { class: "muted" }, "No metrics reported yet."));
      box.dataset.names = keys.join("|");
    }
    const t = data.trial;
    const s = [{ id: t.id, label: "", color: { training: "#1f77b4", validation: "#ff7f0e" }, thick: false,
      groups: { training: data.training_metrics, validation: data.validation_metrics },
      ctx: { batchSize: Number((t.hparams || {}).global_batch_size) || 1,
        recordsPerEpoch: ((experiment || {}).config || {}).records_per_epoch || 0, start: t.start_time } }];
    for (const div of box.querySelectorAll(".metric-chart")) {
      const q = qs.find((x) => x.key === div.dataset.metric);
      const traces = curves.traces(s, q, view);
      det.plot(div, traces, Object.assign(curves.layout(q, view, 280, traces), { margin: { l: 55, r: 10, t: 30, b: 40 } }));
    }
  }

  // Metric groups other than training & validation (report_metrics, the profiler's): chosen in a selector, drawn
  // one chart per metric against batches (or against time for the profiler's groups).
  const groupSelect = document.getElementById("trial-group");
  const SYSTEM_GROUPS = ["cpu", "memory", "disk", "network", "gpu"];
  let group = "";
  groupSelect.addEventListener("change", () => { group = groupSelect.value; lastSignature = ""; refreshTrial(); });

  function renderGroups(groups) {
    const wanted = [""].concat((groups || []).filter((g) => g !== "training" && g !== "validation"));
    if (groupSelect.dataset.groups !== wanted.join("|")) {
      groupSelect.replaceChildren(...wanted.map((g) => el("option", { value: g }, g || "training & validation")));
      groupSelect.value = group;
      groupSelect.dataset.groups = wanted.join("|");
    }
    groupSelect.hidden = wanted.length < 2;
    document.getElementById("trial-controls").hidden = Boolean(group);
  }

  function renderGroupCharts(rows, groupName) {
    const time = SYSTEM_GROUPS.includes(groupName);
    const names = new Set();
    for (const row of rows) for (const [k, v] of Object.entries(row.metrics || {})) if (typeof v === "number") names.add(k);
    const sorted = [...names].sort();
    const box = document.getElementById("trial-charts");
    const signature = `${groupName}:${sorted.join("|")}`;
    if (box.dataset.names !== signature) {
      box.replaceChildren(...sorted.map((n) => figure(n)));
      if (!sorted.length) box.append(el("p", { class: "muted" }, "No metrics reported yet."));
      box.dataset.names = signature;
    }
    for (const div of box.querySelectorAll(".metric-chart")) {
      const name = div.dataset.metric;
      const points = rows.filter((r) => typeof (r.metrics || {})[name] === "number");
      det.plot(div, [{ type: "scatter", mode: points.length === 1 ? "markers" : "lines+markers", name: groupName,
        x: points.map((r) => (time ? new Date(r.steps_completed * 1000) : r.steps_completed)),
        y: points.map((r) => r.metrics[name]) }], {
        height: 280, margin: { l: 55, r: 10, t: 30, b: 40 }, showlegend: false,
        xaxis: Object.assign({ title: { text: time ? "time" : "batches" } },
          time ? {} : curves.countAxis(points.map((r) => r.steps_completed))),
      });
    }
  }

  function renderCheckpoints(checkpoints) {
    det.sortableTable(document.getElementById("trial-checkpoints"), [
      { key: "steps_completed", label: "Batches", numeric: true },
      { key: "uuid", label: "UUID", cell: (c) => el("code", { class: "uuid" }, c.uuid) },
      { key: "state", label: "State", cell: (c) => det.stateBadge(c.state) },
      { key: "size", label: "Size", numeric: true, value: (c) => Object.values(c.resources || {}).reduce((a, b) => a + b, 0),
        cell: (c) => det.bytes(c.resources) },
      { key: "validation", label: "Validation", value: (c) => JSON.stringify(c.validation_metrics || {}),
        cell: (c) => el("span", { class: "kv-list" }, Object.entries(c.validation_metrics || {}).map(([k, v]) => el("span", {}, `${k}=${det.fmtNum(v)}`))) },
      { key: "models", label: "Registered as", optional: true, value: (c) => (c.model_versions || []).length,
        cell: (c) => el("span", { class: "chips" }, (c.model_versions || []).map((v) =>
          el("a", { href: "/models/" + encodeURIComponent(v.model_name), class: "chip" }, `${v.model_name} v${v.version}`))) },
      { key: "metadata", label: "Metadata", optional: true, value: (c) => JSON.stringify(c.metadata || {}),
        cell: (c) => el("code", { class: "small wrap" }, JSON.stringify(c.metadata || {})) },
      { key: "end_time", label: "Saved", optional: true, cell: (c) => det.fmtTime(c.end_time) },
      { key: "actions", label: "", value: () => "", cell: (c) => det.checkpointActions(c, () => { lastSignature = ""; refreshTrial(); }) },
    ], checkpoints, { key: "steps_completed", desc: true }, { name: "checkpoints", empty: "No checkpoints yet." });
  }

  async function refreshTrial() {
    const d = await det.api(`/trials/${id}`);
    if (!experiment) experiment = (await det.api(`/experiments/${d.trial.experiment_id}`)).experiment;
    const signature = JSON.stringify(d);
    if (signature === lastSignature) return !TERMINAL.includes(d.trial.state);
    lastSignature = signature;
    data = d;
    renderSummary(d.trial, d);
    renderGroups(d.metric_groups);
    if (group) {
      renderGroupCharts((await det.api(`/trials/${id}/metrics?group=${encodeURIComponent(group)}`)).metrics, group);
    } else {
      renderCharts();
    }
    det.keyValueTable(document.getElementById("trial-hparams"), det.flatten(d.trial.hparams));
    det.keyValueTable(document.getElementById("trial-validation"), d.trial.latest_validation || {});
    renderCheckpoints(d.checkpoints);
    return !TERMINAL.includes(d.trial.state);
  }

  async function refreshLogs() {
    let more = true;
    let ended = false;
    while (more) {
      const page = await det.api(`/trials/${id}/logs?offset=${logOffset}&limit=1000`);
      const atBottom = logs.scrollTop + logs.clientHeight >= logs.scrollHeight - 4;
      if (page.logs.length) {
        const fragment = document.createDocumentFragment();
        for (const line of page.logs) {
          fragment.append(el("span", { class: "log-line log-" + line.stream }, line.message + "\n"));
        }
        logs.append(fragment);
        if (follow.checked && atBottom) logs.scrollTop = logs.scrollHeight;
      }
      logOffset = page.next_offset;
      more = page.logs.length === 1000;
      ended = TERMINAL.includes(page.trial_state);
    }
    return !ended;
  }

  follow.addEventListener("change", () => { if (follow.checked) logs.scrollTop = logs.scrollHeight; });
  det.ready().then(() => {
    det.poll(refreshTrial, 2000, { notFound: `Trial ${id}` });
    det.poll(refreshLogs, 1000, { notFound: `Trial ${id}` });
  }).catch(() => {});
})();
