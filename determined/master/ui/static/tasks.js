// The Tasks page: interactive tasks (notebooks, commands, TensorBoards, shells) with Open, Terminal (a running
// shell's, for its owner and admins: terminal.html), Logs and Kill, and a form that launches JupyterLab. Open asks the master for a one-time address (POST /tasks/{id}/open) and opens it: the
// master's proxy trades it for a cookie of that task only (docs/tasks.md).
"use strict";

(() => {
  const { el } = det;
  const box = document.getElementById("tasks");
  const showEnded = document.getElementById("show-ended");
  const logsBox = document.getElementById("task-logs");

  function age(t) {
    const since = Date.parse(t.startTime || t.registeredTime || "");
    return isNaN(since) ? "" : det.fmtSeconds((Date.now() - since) / 1000);
  }

  async function openTask(t) {
    const popup = window.open("", "_blank");  // opened now, while the click counts as the user's
    try {
      const answer = await det.api(`/tasks/${t.id}/open`, { method: "POST", body: {} });
      if (popup) popup.location.href = answer.url; else location.href = answer.url;
    } catch (e) {
      if (popup) popup.close();
      det.showStatus(`Could not open ${t.description}: ${e.message}`);
    }
  }

  async function showLogs(t) {
    const answer = await det.api(`/tasks/${t.id}/logs?tail=500`);
    document.getElementById("task-logs-title").textContent = `Logs of ${t.description}`;
    document.getElementById("task-logs-text").textContent =
      answer.logs.map((l) => (l.stream === "master" ? "[master] " : "") + l.message).join("\n");
    logsBox.classList.remove("hidden");
  }

  async function kill(t) {
    try {
      await det.api(`/tasks/${t.id}/kill`, { method: "POST", body: {} });
    } catch (e) {
      det.showStatus(`Could not kill ${t.description}: ${e.message}`);
    }
  }

  function actions(t) {
    const ended = t.state === "STATE_TERMINATED";
    return el("span", { class: "actions" },
      t.serviceAddress && !ended ? el("button", { type: "button", onclick: () => openTask(t) }, "Open") : null,
      t.type === "SHELL" && t.state === "STATE_RUNNING" && det.mayControl(t.username)
        ? el("button", { type: "button", onclick: () => { location.href = `/tasks/${encodeURIComponent(t.id)}/terminal`; } },
          "Terminal") : null,
      el("button", { type: "button", onclick: () => showLogs(t).catch((e) => det.showStatus(e.message)) }, "Logs"),
      !ended && det.mayControl(t.username) ? el("button", { type: "button", onclick: () => kill(t) }, "Kill") : null);
  }

  const columns = [
    { key: "type", label: "Type" },
    { key: "description", label: "Description" },
    { key: "state", label: "State", cell: (t) => det.stateBadge(t.state.replace("STATE_", ""), t.exitStatus || "") },
    { key: "username", label: "Owner" },
    { key: "age", label: "Age", value: (t) => -Date.parse(t.startTime || t.registeredTime || "") || 0, cell: age },
    { key: "slots", label: "Slots", numeric: true },
    { key: "resourcePool", label: "Pool", optional: true },
    { key: "idleSeconds", label: "Idle", optional: true,
      value: (t) => (t.idleSeconds === null || t.idleSeconds === undefined ? "" : det.fmtSeconds(t.idleSeconds)) },
    { key: "exitStatus", label: "Exit status", optional: true, value: (t) => t.exitStatus || "" },
    { key: "actions", label: "", cell: actions, sortable: false },
  ];

  document.getElementById("launch-notebook").addEventListener("submit", async (event) => {
    event.preventDefault();
    const error = document.getElementById("launch-error");
    error.classList.add("hidden");
    const config = { resources: { slots: Number(document.getElementById("nb-slots").value || 0) } };
    const pool = document.getElementById("nb-pool").value.trim();
    if (pool) config.resources.resource_pool = pool;
    const body = { config };
    const template = document.getElementById("nb-template").value.trim();
    if (template) body.template_name = template;
    try {
      await det.api("/notebooks", { method: "POST", body });
      det.showStatus("JupyterLab is starting: Open appears when it answers.");
    } catch (e) {
      error.textContent = e.message;
      error.classList.remove("hidden");
    }
  });

  det.ready().then(() => det.poll(async () => {
    const answer = await det.api(`/tasks?active=${showEnded.checked ? "false" : "true"}`);
    det.sortableTable(box, columns, answer.tasks, { key: "age" }, { name: "tasks",
      empty: "No tasks. Launch JupyterLab above, or run: det cmd run 'echo hi'" });
  }, 3000)).catch(() => {});
})();
