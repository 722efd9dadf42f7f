// One registered model: its metadata and versions, each with the checkpoint behind it.
"use strict";

(() => {
  const { el } = det;
  const name = det.config.modelName;

  const columns = [
    { key: "version", label: "Version" },
    { key: "creation_time", label: "Registered", optional: true, cell: (v) => det.fmtTime(v.creation_time) },
    // what users wrote about the version (`det model` and the edit panel below change them)
    { key: "name", label: "Name", optional: true, value: (v) => v.name || "" },
    { key: "comment", label: "Comment", optional: true, value: (v) => v.comment || "",
      cell: (v) => el("span", { class: "version-comment wrap" }, v.comment || "") },
    { key: "notes", label: "Notes", value: (v) => v.notes || "",
      cell: (v) => el("span", { class: "version-notes wrap" }, v.notes || "") },
    { key: "uuid", label: "Checkpoint", value: (v) => v.checkpoint.uuid, cell: (v) => el("code", { class: "uuid" }, v.checkpoint.uuid) },
    { key: "actions", label: "", value: () => "", cell: (v) => det.checkpointActions(v.checkpoint) },
    { key: "state", label: "State", value: (v) => v.checkpoint.state, cell: (v) => det.stateBadge(v.checkpoint.state) },
    { key: "experiment", label: "Experiment", value: (v) => v.checkpoint.experiment_id,
      cell: (v) => el("a", { href: "/experiments/" + v.checkpoint.experiment_id }, String(v.checkpoint.experiment_id)) },
    { key: "trial", label: "Trial", value: (v) => v.checkpoint.trial_id,
      cell: (v) => el("a", { href: "/trials/" + v.checkpoint.trial_id }, String(v.checkpoint.trial_id)) },
    { key: "batches", label: "Batches", value: (v) => v.checkpoint.steps_completed },
    { key: "validation", label: "Validation", value: (v) => JSON.stringify(v.checkpoint.validation_metrics || {}),
      cell: (v) => el("span", { class: "kv-list" }, Object.entries(v.checkpoint.validation_metrics || {})
        .map(([k, x]) => el("span", {}, `${k}=${det.fmtNum(x)}`))) },
    { key: "metadata", label: "Checkpoint metadata", optional: true, value: (v) => JSON.stringify(v.checkpoint.metadata || {}),
      cell: (v) => el("code", { class: "small wrap" }, JSON.stringify(v.checkpoint.metadata || {})) },
    { key: "size", label: "Size", optional: true, value: (v) => Object.values(v.checkpoint.resources || {}).reduce((a, b) => a + b, 0),
      cell: (v) => det.bytes(v.checkpoint.resources) },
  ];

  det.ready().then(() => det.poll(async () => {
    const d = await det.api(`/models/${encodeURIComponent(name)}/versions`);
    const m = d.model;
    document.getElementById("model-name").textContent = m.name;
    document.getElementById("model-summary").replaceChildren(
      el("span", {}, m.description || "(no description)"), el("span", {}, `Versions ${m.num_versions}`),
      el("span", {}, `Created ${det.fmtTime(m.creation_time)}`), el("span", {}, `Updated ${det.fmtTime(m.last_updated_time)}`));
    document.getElementById("model-metadata").textContent = JSON.stringify(m.metadata || {}, null, 2);
    det.sortableTable(document.getElementById("versions-table"), columns, d.versions, { key: "version", desc: true },
      { name: "versions", empty: `No versions yet: register a checkpoint from a trial's page, or with det model register-version ${name} UUID.` });
  }, 5000, { notFound: `Model ${name}` })).catch(() => {});
})();
