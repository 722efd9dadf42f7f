// The cluster: how many slots are in use, and by which trial, experiment and owner; the resource pools (slots,
// defaults, scheduler: GET /resource-pools) and the agents with their slots (GET /agents, /agents/{id}/slots).
"use strict";

(() => {
  const { el } = det;
  const schedulerWords = (p) => (p.scheduler_type === "SCHEDULER_TYPE_FAIR_SHARE" ? "fair share"
    : `priority, preemption ${p.preemption ? "on" : "off"}, default priority ${p.default_priority}`);
  const poolColumns = [
    { key: "name", label: "Pool", cell: (p) => el("span", {}, el("a", { href: "/jobs?pool=" + encodeURIComponent(p.name),
      title: "its job queue" }, p.name), p.description ? el("div", { class: "muted small" }, p.description) : null) },
    { key: "slots", label: "Slots used/total", value: (p) => p.slots_used, cell: (p) => `${p.slots_used}/${
      p.slots_available === null || p.slots_available === undefined ? "?" : p.slots_available}` },
    { key: "slot_type", label: "Slot type", optional: true, value: (p) => p.slot_type || "" },
    { key: "defaults", label: "Default for", value: (p) => [p.default_compute_pool ? "compute" : "",
      p.default_aux_pool ? "aux" : ""].filter(Boolean).join(", ") },
    { key: "scheduler", label: "Scheduler", value: schedulerWords, cell: (p) => el("span", { class: "ellipsis" }, schedulerWords(p)) },
    { key: "queued", label: "Queued", optional: true, numeric: true, value: (p) => p.stats.queued_count },
    { key: "scheduled", label: "Scheduled", optional: true, numeric: true, value: (p) => p.stats.scheduled_count },
    { key: "slot_ids", label: "Slot ids", optional: true, value: (p) => p.slot_ids.join(", ") },
  ];
  const slotColumns = [
    { key: "id", label: "Slot", value: (s) => Number(s.id), cell: (s) => s.id },
    { key: "device_id", label: "Device", value: (s) => `${s.device_type} ${s.device_id}` },
    { key: "resource_pool", label: "Pool" },
    { key: "holder", label: "Held by", value: (s) => (s.trial_id === null ? "" : s.trial_id),
      cell: (s) => (s.trial_id === null ? det.stateBadge("FREE") : el("span", {},
        el("a", { href: "/trials/" + s.trial_id }, `trial ${s.trial_id}`), " of ",
        el("a", { href: "/experiments/" + s.experiment_id }, `experiment ${s.experiment_id}`))) },
    { key: "enabled", label: "Enabled", value: (s) => (s.enabled ? (s.draining ? "draining" : "yes") : "no") },
  ];

  const slotTables = new Map(); // agent id -> its slots table's container (kept: its sort survives the polls)
  function agentBlock(agent, slots) {
    if (!slotTables.has(agent.id)) slotTables.set(agent.id, el("div", { class: "table-wrap" }));
    const wrap = slotTables.get(agent.id);
    const state = agent.enabled ? (agent.draining ? "draining" : "enabled") : "disabled";
    const block = el("div", { class: "agent", "data-agent": agent.id },
      el("h3", { class: "agent-head" }, agent.id, " ", el("span", { class: "muted small" },
        `${agent.slots} slots · ${agent.containers} runs · pools ${agent.resource_pools.join(", ") || "none"} · ${state}` +
        (agent.addresses.length ? ` · ${agent.addresses.join(", ")}` : ""))), wrap);
    det.sortableTable(wrap, slotColumns, slots, undefined, { empty: "No slots." });
    return block;
  }

  async function showPoolsAndAgents() {
    const [pools, agents] = await Promise.all([det.api("/resource-pools"), det.api("/agents")]);
    det.sortableTable(document.getElementById("pools-table"), poolColumns, pools.resource_pools, undefined,
      { name: "pools", empty: "No resource pools." });
    const slots = await Promise.all(agents.agents.map((a) => det.api(`/agents/${encodeURIComponent(a.id)}/slots`)));
    const box = document.getElementById("agents");
    if (!agents.agents.length) {
      box.replaceChildren(el("p", { class: "muted" }, "No agents: no scheduler runs on this master."));
    } else {
      box.replaceChildren(...agents.agents.map((a, i) => agentBlock(a, slots[i].slots)));
    }
  }
  // What the trial does (RUNNING, WAITING with its slot, STOPPING...), as the master words it; its stored state
  // (ACTIVE) says only that it has not ended.
  const trialWord = (a) => a.trial_status || a.trial_state;
  const columns = [
    { key: "trial_id", label: "Trial", cell: (a) => el("a", { href: "/trials/" + a.trial_id }, String(a.trial_id)) },
    { key: "experiment_id", label: "Experiment",
      cell: (a) => el("a", { href: "/experiments/" + a.experiment_id, class: "ellipsis" }, `${a.experiment_id} ${a.description || ""}`) },
    { key: "owner", label: "Owner" },
    { key: "slots", label: "Slots" },
    { key: "slot_ids", label: "Slot ids", optional: true, value: (a) => (a.slot_ids || []).join(", ") },
    { key: "trial_status", label: "Trial", className: "trial-state", value: trialWord,
      cell: (a) => det.stateBadge(trialWord(a), a.trial_status_reason || null) },
    { key: "experiment_state", label: "Experiment state", cell: (a) => det.stateBadge(a.experiment_state) },
    { key: "nodes", label: "Nodes", optional: true, value: (a) => (a.nodes || []).join(", ") || "this machine" },
    { key: "pid", label: "Process", optional: true, value: (a) => (a.pid === null || a.pid === undefined ? "" : String(a.pid)) },
    { key: "allocation_id", label: "Allocation", optional: true, cell: (a) => el("code", { class: "small wrap" }, a.allocation_id) },
  ];

  det.ready().then(() => det.poll(async () => {
    const [d] = await Promise.all([det.api("/cluster/slots"), showPoolsAndAgents()]);
    const total = d.total === null ? "unknown (no scheduler runs)" : `${d.total} ${d.kind} slot(s)`;
    const owners = {};
    for (const a of d.allocations) owners[a.owner] = (owners[a.owner] || 0) + a.slots;
    document.getElementById("cluster-summary").replaceChildren(
      el("span", {}, `In use ${d.used}`), el("span", {}, `Total ${total}`),
      el("span", {}, "By owner " + (Object.entries(owners).map(([o, n]) => `${o}: ${n}`).join(", ") || "none")));
    const fraction = d.total ? Math.min(1, d.used / d.total) : 0;
    document.getElementById("slot-usage").style.width = Math.round(fraction * 100) + "%";
    det.sortableTable(document.getElementById("allocations-table"), columns, d.allocations, undefined,
      { name: "allocations", empty: "No trial holds a slot." });
  }, 2000)).catch(() => {});
})();
