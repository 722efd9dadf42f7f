// One trial: metric charts, hyperparameters, checkpoints with their metadata, and logs that follow live.
"use strict";

(() => {
  const { el } = det;
  const id = window.DET_UI.trialId;
  const TERMINAL = ["COMPLETED", "CANCELED", "ERROR"];
  const logs = document.getElementById("logs");
  const follow = document.getElementById("follow-logs");
  let logOffset = 0;
  let lastSignature = "";

  // Nested hyperparameters under dotted names (optim.lr), for the table only.
  function dotted(values, prefix = "", out = {}) {
    for (const [k, v] of Object.entries(values || {})) {
      if (v && typeof v === "object" && !Array.isArray(v) && Object.keys(v).length) dotted(v, prefix + k + ".", out);
      else out[prefix + k] = v;
    }
    return out;
  }

  function renderSummary(t) {
    document.getElementById("trial-experiment").replaceChildren("of ",
      el("a", { href: "/experiments/" + t.experiment_id }, `experiment ${t.experiment_id}`));
    document.getElementById("trial-state").replaceChildren(det.stateBadge(t.state));
    det.fill(document.getElementById("trial-summary"),
      el("span", {}, `Batches ${t.total_batches}`),
      el("span", {}, `Best validation ${t.best_validation === null ? "none yet" : det.fmtNum(t.best_validation)}`),
      el("span", {}, `Restarts ${t.restarts}`),
      el("span", {}, `Seed ${t.seed}`),
      el("span", {}, `Started ${det.fmtTime(t.start_time)}`),
      t.end_time ? el("span", {}, `Ended ${det.fmtTime(t.end_time)}`) : null,
      t.warm_start_checkpoint_uuid ? el("span", {}, `Started from checkpoint ${t.warm_start_checkpoint_uuid}`) : null,
      t.log_policy_matched ? el("span", {}, `Log policy matched: ${t.log_policy_matched}`) : null,
      t.runner_status ? el("span", {}, `Status: ${t.runner_status}`) : null,
    );
    document.title = `Trial ${id} · ${t.state} · Determined`;
  }

  // Metric groups: training & validation together (the default), or one other group (report_metrics, profiler).
  const groupSelect = document.getElementById("trial-group");
  const SYSTEM_GROUPS = ["cpu", "memory", "disk", "network", "gpu"];  // the profiler's: x is a time
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
  }

  function renderCharts(training, validation, groupName) {
    const sets = groupName ? [[training, groupName, "solid"]]
      : [[training, "training", "solid"], [validation, "validation", "dot"]];
    const time = SYSTEM_GROUPS.includes(groupName);
    const names = new Set();
    for (const row of training.concat(validation)) {
      for (const [k, v] of Object.entries(row.metrics || {})) if (typeof v === "number") names.add(k);
    }
    const sorted = [...names].sort();
    const box = document.getElementById("trial-charts");
    if (box.dataset.names !== sorted.join("|")) {
      box.replaceChildren(...sorted.map((n) => el("div", { class: "metric-chart", "data-metric": n })));
      if (!sorted.length) box.append(el("p", { class: "muted" }, "No metrics reported yet."));
      box.dataset.names = sorted.join("|");
    }
    for (const div of box.querySelectorAll(".metric-chart")) {
      const name = div.dataset.metric;
      const series = (rows, label, dash) => {
        const points = rows.filter((r) => typeof (r.metrics || {})[name] === "number");
        return { type: "scatter", mode: points.length === 1 ? "markers" : "lines+markers", name: label,
          x: points.map((r) => (time ? new Date(r.steps_completed * 1000) : r.steps_completed)),
          y: points.map((r) => r.metrics[name]), line: { dash } };
      };
      det.plot(div, sets.map(([rows, label, dash]) => series(rows, label, dash)), {
        height: 280, title: { text: name, font: { size: 14 } }, margin: { l: 55, r: 10, t: 35, b: 40 },
        xaxis: { title: { text: time ? "time" : "batches" } }, legend: { orientation: "h", y: -0.3 },
      });
    }
  }

  function renderCheckpoints(checkpoints) {
    det.sortableTable(document.getElementById("trial-checkpoints"), [
      { key: "steps_completed", label: "Batches" },
      { key: "uuid", label: "UUID", cell: (c) => el("code", {}, c.uuid) },
      { key: "state", label: "State", cell: (c) => det.stateBadge(c.state) },
      { key: "size", label: "Size", value: (c) => Object.values(c.resources || {}).reduce((a, b) => a + b, 0), cell: (c) => det.bytes(c.resources) },
      { key: "validation", label: "Validation", value: (c) => JSON.stringify(c.validation_metrics || {}),
        cell: (c) => Object.entries(c.validation_metrics || {}).map(([k, v]) => `${k}=${det.fmtNum(v)}`).join(" ") },
      { key: "metadata", label: "Metadata", value: (c) => JSON.stringify(c.metadata || {}),
        cell: (c) => el("code", { class: "small" }, JSON.stringify(c.metadata || {})) },
      { key: "framework", label: "Framework", value: (c) => [c.framework, c.format].filter(Boolean).join(" / ") },
      { key: "models", label: "Registered as", value: (c) => (c.model_versions || []).length,
        cell: (c) => el("span", {}, (c.model_versions || []).map((v) =>
          el("a", { href: "/models/" + encodeURIComponent(v.model_name), class: "chip" }, `${v.model_name} v${v.version}`))) },
      { key: "end_time", label: "Time", cell: (c) => det.fmtTime(c.end_time) },
    ], checkpoints, { key: "steps_completed", desc: true });
  }

  async function refreshTrial() {
    const d = await det.api(`/trials/${id}`);
    const signature = JSON.stringify(d);
    if (signature === lastSignature) return !TERMINAL.includes(d.trial.state);
    lastSignature = signature;
    renderSummary(d.trial);
    renderGroups(d.metric_groups);
    if (group) {
      const rows = (await det.api(`/trials/${id}/metrics?group=${encodeURIComponent(group)}`)).metrics;
      renderCharts(rows, [], group);
    } else {
      renderCharts(d.training_metrics, d.validation_metrics, "");
    }
    det.keyValueTable(document.getElementById("trial-hparams"), dotted(d.trial.hparams));
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
    det.poll(refreshTrial, 2000);
    det.poll(refreshLogs, 1000);
  }).catch(() => {});
})();
