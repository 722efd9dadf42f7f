// The experiments list: state, progress, searcher, best metric, owner, start time; filter and sort.
"use strict";

(() => {
  const { el } = det;
  const table = document.getElementById("experiments-table");
  const filter = document.getElementById("filter");
  const stateFilter = document.getElementById("state-filter");
  const count = document.getElementById("count");
  const projectFilter = document.getElementById("project-filter");
  const TERMINAL = ["COMPLETED", "CANCELED", "ERROR"];
  let experiments = [];

  const columns = [
    { key: "id", label: "ID", pinned: true, value: (e) => e.id, cell: (e) => el("a", { href: "/experiments/" + e.id }, String(e.id)) },
    { key: "name", label: "Name", value: (e) => e.name || e.description,
      cell: (e) => el("a", { href: "/experiments/" + e.id, class: "ellipsis", title: e.description || e.name || "" },
        e.name || e.description || "(no name)") },
    { key: "state", label: "State", value: (e) => e.state, cell: (e) => det.stateBadge(e.state) },
    { key: "progress", label: "Progress", value: (e) => e.progress, cell: (e) => det.progressBar(e.progress) },
    { key: "searcher", label: "Searcher", optional: true, value: (e) => e.config.searcher.name },
    { key: "best", label: "Best metric", value: (e) => e.best_validation,
      cell: (e) => e.best_validation === null ? "" : el("span", {}, el("span", { class: "metric-name" }, e.searcher_metric),
        det.fmtNum(e.best_validation)) },
    { key: "trials", label: "Trials", value: (e) => e.num_trials, numeric: true },
    { key: "project", label: "Project", optional: true, value: (e) => `${e.workspace} / ${e.project}`,
      cell: (e) => el("a", { href: "/?project=" + e.project_id, class: "ellipsis" }, `${e.workspace} / ${e.project}`) },
    { key: "owner", label: "Owner", optional: true, value: (e) => e.owner },
    { key: "start", label: "Started", optional: true, value: (e) => e.start_time,
      cell: (e) => el("span", { class: "time" }, det.fmtTime(e.start_time)) },
    { key: "duration", label: "Duration", value: (e) => new Date(e.end_time || Date.now()) - new Date(e.start_time),
      cell: (e) => det.fmtDuration(e.start_time, e.end_time), numeric: true },
    { key: "labels", label: "Labels", optional: true, value: (e) => (e.labels || []).join(", "),
      cell: (e) => el("span", { class: "chips" }, (e.labels || []).map((l) => el("span", { class: "chip" }, l))) },
  ];

  function matches(e) {
    if (projectFilter.value && String(e.project_id) !== projectFilter.value) return false;
    const wanted = stateFilter.value;
    if (wanted === "active" && TERMINAL.includes(e.state)) return false;
    if (wanted && wanted !== "active" && e.state !== wanted) return false;
    const text = filter.value.trim().toLowerCase();
    if (!text) return true;
    const haystack = [e.id, e.name, e.description, e.owner, e.state, e.config.searcher.name, ...(e.labels || [])].join(" ").toLowerCase();
    return text.split(/\s+/).every((word) => haystack.includes(word));
  }

  function render() {
    const shown = experiments.filter(matches);
    count.textContent = `${shown.length} of ${experiments.length}`;
    det.sortableTable(table, columns, shown, { key: "id", desc: true }, { name: "experiments", select: window.detBulkSelect, // editing: the bulk-action checkboxes (bulk.js)
      empty: experiments.length ? "No experiment matches the filter." : "No experiments yet: det experiment create CONFIG_FILE MODEL_DIR" });
  }

  filter.addEventListener("input", render);
  stateFilter.addEventListener("change", render);
  // The project filter: every project as "workspace / project"; `?project=ID` preselects one (workspace pages link here).
  projectFilter.addEventListener("change", () => {
    const url = new URL(location.href);
    if (projectFilter.value) url.searchParams.set("project", projectFilter.value); else url.searchParams.delete("project");
    history.replaceState(null, "", url);
    render();
  });
  const wantedProject = new URLSearchParams(location.search).get("project") || "";
  det.ready().then(async () => {
    const projects = (await det.api("/projects")).projects;
    det.fill(projectFilter, el("option", { value: "" }, "All projects"),
      projects.map((p) => el("option", { value: String(p.id) }, `${p.workspace_name} / ${p.name}${p.archived ? " (archived)" : ""}`)));
    projectFilter.value = projects.some((p) => String(p.id) === wantedProject) ? wantedProject : "";
    render();
  }).catch(() => {});
  det.ready().then(() => det.poll(async () => {
    experiments = (await det.api("/experiments")).experiments;
    render();
  }, 3000)).catch(() => {});
})();
