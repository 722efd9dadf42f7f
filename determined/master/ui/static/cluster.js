// The cluster: how many slots are in use, and by which trial, experiment and owner.
"use strict";

(() => {
  const { el } = det;
  const trialWord = (a) => (a.trial_state === "ACTIVE" ? "RUNNING" : a.trial_state);
  const columns = [
    { key: "trial_id", label: "Trial", cell: (a) => el("a", { href: "/trials/" + a.trial_id }, String(a.trial_id)) },
    { key: "experiment_id", label: "Experiment",
      cell: (a) => el("a", { href: "/experiments/" + a.experiment_id, class: "ellipsis" }, `${a.experiment_id} ${a.description || ""}`) },
    { key: "owner", label: "Owner" },
    { key: "slots", label: "Slots" },
    { key: "slot_ids", label: "Slot ids", optional: true, value: (a) => (a.slot_ids || []).join(", ") },
    // a trial that holds slots is running (its stored state, ACTIVE, says only that it is not finished)
    { key: "trial_state", label: "Trial", className: "trial-state", value: trialWord,
      cell: (a) => det.stateBadge(trialWord(a), a.trial_state === "ACTIVE" ? "it holds these slots" : null) },
    { key: "experiment_state", label: "Experiment state", cell: (a) => det.stateBadge(a.experiment_state) },
    { key: "nodes", label: "Nodes", optional: true, value: (a) => (a.nodes || []).join(", ") || "this machine" },
    { key: "pid", label: "Process", optional: true, value: (a) => (a.pid === null || a.pid === undefined ? "" : String(a.pid)) },
    { key: "allocation_id", label: "Allocation", optional: true, cell: (a) => el("code", { class: "small wrap" }, a.allocation_id) },
  ];

  det.ready().then(() => det.poll(async () => {
    const d = await det.api("/cluster/slots");
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
