// The cluster: how many slots are in use, and by which trial, experiment and owner.
"use strict";

(() => {
  const { el } = det;
  const columns = [
    { key: "trial_id", label: "Trial", cell: (a) => el("a", { href: "/trials/" + a.trial_id }, String(a.trial_id)) },
    { key: "experiment_id", label: "Experiment",
      cell: (a) => el("a", { href: "/experiments/" + a.experiment_id }, `${a.experiment_id} ${a.description || ""}`) },
    { key: "owner", label: "Owner" },
    { key: "slots", label: "Slots" },
    { key: "slot_ids", label: "Slot ids", value: (a) => (a.slot_ids || []).join(", ") },
    { key: "trial_state", label: "Trial state", cell: (a) => det.stateBadge(a.trial_state) },
    { key: "experiment_state", label: "Experiment state", cell: (a) => det.stateBadge(a.experiment_state) },
    { key: "nodes", label: "Nodes", value: (a) => (a.nodes || []).join(", ") || "this machine" },
    { key: "pid", label: "Process", value: (a) => (a.pid === null || a.pid === undefined ? "" : String(a.pid)) },
    { key: "allocation_id", label: "Allocation", cell: (a) => el("code", { class: "small" }, a.allocation_id) },
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
    det.sortableTable(document.getElementById("allocations-table"), columns, d.allocations);
  }, 2000)).catch(() => {});
})();
