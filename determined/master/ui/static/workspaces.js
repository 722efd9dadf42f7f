// Workspaces and their projects: each project links to the experiments page filtered to it, each workspace to its
// models.
"use strict";

(() => {
  const { el } = det;
  const box = document.getElementById("workspaces");

  const projectColumns = [
    { key: "name", label: "Project", cell: (p) => el("a", { href: "/?project=" + p.id }, p.name) },
    { key: "description", label: "Description" },
    { key: "num_experiments", label: "Experiments", numeric: true },
    { key: "num_active_experiments", label: "Active", numeric: true },
    { key: "username", label: "Owner", optional: true },
    { key: "archived", label: "Archived", value: (p) => (p.archived ? "archived" : "") },
  ];

  function section(w, projects) {
    const table = el("div", { class: "table-wrap" });
    det.sortableTable(table, projectColumns, projects, { key: "name" }, { name: "projects-" + w.id,
      empty: `No projects yet: det project create ${w.name} NAME` });
    return el("section", { class: "workspace", "data-workspace": String(w.id) },
      el("h2", {}, w.name, w.archived ? el("span", { class: "muted" }, " (archived)") : null),
      el("p", { class: "muted" }, `${w.num_projects} project(s), ${w.num_experiments} experiment(s), `,
        el("a", { href: "/models?workspace=" + w.id }, `${w.num_models} model(s)`),
        w.username ? ` · owner ${w.username}` : ""),
      table);
  }

  det.ready().then(() => det.poll(async () => {
    const [workspaces, projects] = await Promise.all([det.api("/workspaces"), det.api("/projects")]);
    det.fill(box, workspaces.workspaces.map((w) => section(w, projects.projects.filter((p) => p.workspace_id === w.id))));
  }, 5000)).catch(() => {});
})();
