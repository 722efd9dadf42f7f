// The model registry: every model with its description, metadata and number of versions.
"use strict";

(() => {
  const { el } = det;
  const table = document.getElementById("models-table");
  const filter = document.getElementById("filter");
  const count = document.getElementById("count");
  const workspaceFilter = document.getElementById("workspace-filter");
  let models = [];

  const link = (m) => el("a", { href: "/models/" + encodeURIComponent(m.name) }, m.name);
  const columns = [
    { key: "name", label: "Name", cell: link },
    { key: "description", label: "Description" },
    { key: "num_versions", label: "Versions" },
    { key: "workspace", label: "Workspace", optional: true },
    { key: "metadata", label: "Metadata", optional: true, value: (m) => JSON.stringify(m.metadata || {}),
      cell: (m) => el("code", { class: "small" }, JSON.stringify(m.metadata || {})) },
    { key: "creation_time", label: "Created", cell: (m) => det.fmtTime(m.creation_time) },
    { key: "last_updated_time", label: "Updated", cell: (m) => det.fmtTime(m.last_updated_time) },
  ];

  function render() {
    const text = filter.value.trim().toLowerCase();
    const ws = workspaceFilter.value;
    const shown = models.filter((m) => (!ws || String(m.workspace_id) === ws)
      && (!text || `${m.name} ${m.description}`.toLowerCase().includes(text)));
    count.textContent = `${shown.length} of ${models.length}`;
    det.sortableTable(table, columns, shown, undefined, { name: "models",
      empty: models.length ? "No model matches the filter." : "No models yet: register a checkpoint from a trial's page, or with det model create NAME." });
  }

  filter.addEventListener("input", render);
  workspaceFilter.addEventListener("change", render);
  // `?workspace=ID` preselects a workspace (the workspaces page links here).
  const wantedWorkspace = new URLSearchParams(location.search).get("workspace") || "";
  det.ready().then(async () => {
    const workspaces = (await det.api("/workspaces")).workspaces;
    det.fill(workspaceFilter, el("option", { value: "" }, "All workspaces"),
      workspaces.map((w) => el("option", { value: String(w.id) }, w.name + (w.archived ? " (archived)" : ""))));
    workspaceFilter.value = workspaces.some((w) => String(w.id) === wantedWorkspace) ? wantedWorkspace : "";
    render();
  }).catch(() => {});
  det.ready().then(() => det.poll(async () => {
    models = (await det.api("/models")).models;
    render();
  }, 5000)).catch(() => {});
})();
