// Editing from the UI: the same REST routes as the CLI, the master's checks decide, and its refusal is shown as it
// wrote it (message and problems), never swallowed. Shared helpers (window.detEdit, used by bulk.js) and the
// editors of the pages that have a container for them: #exp-edit (experiment: name, description, labels, notes),
// #model-edit (model: description, labels, metadata; a version's name, comment, notes, metadata), #workspace-create
// (new workspaces and projects).
"use strict";

const detEdit = (() => {
  const { el } = det;

  // One write to the master. Resolves to {ok, status, data, message}: message is the master's refusal
  // ("message: problem; problem") when !ok. A 401 logs in again once (det.api) and retries.
  async function send(path, method, body) {
    const attempt = async () => {
      const headers = { Accept: "application/json" };
      const token = localStorage.getItem("det_token");
      if (token) headers.Authorization = "Bearer " + token;
      if (body !== undefined) headers["Content-Type"] = "application/json";
      const response = await fetch("/api/v1" + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      let data = null;
      try { data = await response.json(); } catch (e) { data = null; }
      return { response, data };
    };
    let result;
    try {
      result = await attempt();
      if (result.response.status === 401 && det.config.authEnabled) {
        await det.api("/me"); // the shared re-login (or the login page)
        result = await attempt();
      }
    } catch (e) {
      return { ok: false, status: 0, data: null, message: "could not reach the master: " + (e && e.message) };
    }
    const { response, data } = result;
    if (response.ok) return { ok: true, status: response.status, data, message: "" };
    return { ok: false, status: response.status, data, message: refusal(data, response) };
  }

  function refusal(data, response) {
    const detail = data && data.detail;
    if (typeof detail === "string") return detail;
    if (detail && typeof detail === "object") {
      const problems = Array.isArray(detail.problems) && detail.problems.length ? ": " + detail.problems.join("; ") : "";
      return (detail.message || response.statusText) + problems;
    }
    return `${response.status} ${response.statusText}`;
  }

  // "a, b,c" -> ["a", "b", "c"] (no empty ones, no repeats).
  function labelList(text) {
    return Array.from(new Set(String(text || "").split(",").map((s) => s.trim()).filter(Boolean)));
  }

  function say(box, ok, text) {
    box.textContent = text;
    box.className = "edit-message " + (ok ? "ok" : "refused");
    box.setAttribute("role", ok ? "status" : "alert");
  }

  // A JSON object typed in a textarea; throws a readable error.
  function jsonObject(text, what) {
    let value;
    try { value = JSON.parse(text.trim() || "{}"); } catch (e) { throw new Error(`${what} is not valid JSON: ${e.message}`); }
    if (!value || typeof value !== "object" || Array.isArray(value)) throw new Error(`${what} must be a JSON object ({"key": value})`);
    return value;
  }

  function field(label, input, wide) {
    return el("label", { class: wide ? "wide" : null }, label, input);
  }

  // The page's own script logs in (det.ready); these editors wait for its token instead of logging in a second
  // time (every failed automatic login counts against the user's password throttle: docs/auth.md).
  function ready() {
    if (!det.config.authEnabled || localStorage.getItem("det_token")) return det.ready();
    return new Promise((resolve) => {
      const wait = () => (localStorage.getItem("det_token") ? resolve(det.ready()) : setTimeout(wait, 200));
      setTimeout(wait, 200);
    });
  }

  return { send, refusal, labelList, say, jsonObject, field, ready };
})();

// ---- the experiment page: name, description, labels, notes
(() => {
  const box = document.getElementById("exp-edit");
  if (!box) return;
  const { el } = det;
  const { field, say } = detEdit;
  const id = det.config.experimentId;
  const inputs = {
    name: el("input", { id: "edit-name", maxlength: "512" }),
    description: el("input", { id: "edit-description" }),
    labels: el("input", { id: "edit-labels", placeholder: "comma, separated" }),
    notes: el("textarea", { id: "edit-notes", rows: "4" }),
  };
  const message = el("span", { id: "edit-message", class: "edit-message" });
  let current = null;

  function load(exp) {
    current = exp;
    inputs.name.value = exp.name || "";
    inputs.description.value = exp.description || "";
    inputs.labels.value = (exp.labels || []).join(", ");
    inputs.notes.value = exp.notes || "";
  }

  async function save(event) {
    event.preventDefault();
    if (!current) return;
    const wanted = { name: inputs.name.value.trim(), description: inputs.description.value,
      labels: detEdit.labelList(inputs.labels.value), notes: inputs.notes.value };
    const body = {};
    if (wanted.name !== (current.name || "")) body.name = wanted.name;
    if (wanted.description !== (current.description || "")) body.description = wanted.description;
    if (JSON.stringify(wanted.labels) !== JSON.stringify(current.labels || [])) body.labels = wanted.labels;
    if (wanted.notes !== (current.notes || "")) body.notes = wanted.notes;
    if (!Object.keys(body).length) { say(message, true, "Nothing changed."); return; }
    const answer = await detEdit.send(`/experiments/${id}`, "PATCH", body);
    if (!answer.ok) { say(message, false, "Refused by the master: " + answer.message); return; }
    load(answer.data.experiment);
    say(message, true, `Saved ${Object.keys(body).join(", ")}.`);
  }

  const form = el("form", { class: "edit-form", id: "exp-edit-form", onsubmit: save },
    field("Name", inputs.name), field("Description", inputs.description),
    field("Labels (comma separated)", inputs.labels, true), field("Notes", inputs.notes, true),
    el("div", { class: "edit-buttons" },
      el("button", { type: "submit", id: "edit-save" }, "Save"),
      el("button", { type: "button", onclick: () => { if (current) load(current); message.textContent = ""; } }, "Reset"),
      el("a", { href: "/compare?experiments=" + id, class: "small" }, "Compare with other experiments"),
      message));
  box.replaceChildren(el("details", { class: "edit-panel", id: "exp-edit-panel" },
    el("summary", {}, "Edit name, description, labels, notes"), form));
  detEdit.ready().then(() => det.api(`/experiments/${id}`)).then((d) => load(d.experiment)).catch(() => {});
})();

// ---- the model page: description, labels, metadata; a version's name, comment, notes, metadata
(() => {
  const box = document.getElementById("model-edit");
  if (!box) return;
  const { el } = det;
  const { field, say } = detEdit;
  const name = det.config.modelName;
  const path = `/models/${encodeURIComponent(name)}`;
  const m = {
    description: el("input", { id: "model-edit-description" }),
    labels: el("input", { id: "model-edit-labels", placeholder: "comma, separated" }),
    metadata: el("textarea", { id: "model-edit-metadata", rows: "5", spellcheck: "false" }),
  };
  const v = {
    version: el("select", { id: "version-edit-select", "aria-label": "version" }),
    name: el("input", { id: "version-edit-name" }),
    comment: el("input", { id: "version-edit-comment" }),
    notes: el("textarea", { id: "version-edit-notes", rows: "3" }),
    metadata: el("textarea", { id: "version-edit-metadata", rows: "4", spellcheck: "false" }),
  };
  const modelMessage = el("span", { id: "model-edit-message", class: "edit-message" });
  const versionMessage = el("span", { id: "version-edit-message", class: "edit-message" });
  let versions = [];

  function loadModel(model) {
    m.description.value = model.description || "";
    m.labels.value = (model.labels || []).join(", ");
    m.metadata.value = JSON.stringify(model.metadata || {}, null, 2);
  }

  function loadVersion() {
    const chosen = versions.find((x) => String(x.version) === v.version.value);
    v.name.value = (chosen && chosen.name) || "";
    v.comment.value = (chosen && chosen.comment) || "";
    v.notes.value = (chosen && chosen.notes) || "";
    v.metadata.value = JSON.stringify((chosen && chosen.metadata) || {}, null, 2);
  }

  async function reload() {
    const d = await det.api(`${path}/versions`);
    loadModel(d.model);
    versions = d.versions || [];
    const keep = v.version.value;
    det.fill(v.version, versions.map((x) => el("option", { value: String(x.version) }, `Version ${x.version}`)));
    if (versions.some((x) => String(x.version) === keep)) v.version.value = keep;
    versionForm.classList.toggle("hidden", !versions.length);
    loadVersion();
  }

  async function saveModel(event) {
    event.preventDefault();
    let metadata;
    try { metadata = detEdit.jsonObject(m.metadata.value, "Metadata"); } catch (e) { say(modelMessage, false, e.message); return; }
    const answer = await detEdit.send(path, "PATCH",
      { description: m.description.value, labels: detEdit.labelList(m.labels.value), metadata });
    if (!answer.ok) { say(modelMessage, false, "Refused by the master: " + answer.message); return; }
    loadModel(answer.data.model);
    say(modelMessage, true, "Saved the description, labels and metadata.");
  }

  async function saveVersion(event) {
    event.preventDefault();
    let metadata;
    try { metadata = detEdit.jsonObject(v.metadata.value, "Version metadata"); } catch (e) { say(versionMessage, false, e.message); return; }
    const body = { comment: v.comment.value, notes: v.notes.value, metadata };
    if (v.name.value.trim()) body.name = v.name.value.trim();
    const answer = await detEdit.send(`${path}/versions/${encodeURIComponent(v.version.value)}`, "PATCH", body);
    if (!answer.ok) { say(versionMessage, false, "Refused by the master: " + answer.message); return; }
    const saved = answer.data.version;
    versions = versions.map((x) => (x.version === saved.version ? saved : x));
    loadVersion();
    say(versionMessage, true, `Saved version ${saved.version}.`);
  }

  const modelForm = el("form", { class: "edit-form", id: "model-edit-form", onsubmit: saveModel },
    field("Description", m.description), field("Labels (comma separated)", m.labels),
    field("Metadata (a JSON object; replaces the whole metadata)", m.metadata, true),
    el("div", { class: "edit-buttons" }, el("button", { type: "submit", id: "model-edit-save" }, "Save model"), modelMessage));
  const versionForm = el("form", { class: "edit-form hidden", id: "version-edit-form", onsubmit: saveVersion },
    el("h3", { class: "edit-sub" }, "A version"),
    field("Version", v.version), field("Name", v.name), field("Comment", v.comment, true),
    field("Notes", v.notes, true), field("Metadata (a JSON object)", v.metadata, true),
    el("div", { class: "edit-buttons" }, el("button", { type: "submit", id: "version-edit-save" }, "Save version"), versionMessage));
  v.version.addEventListener("change", loadVersion);
  box.replaceChildren(el("details", { class: "edit-panel", id: "model-edit-panel" },
    el("summary", {}, "Edit description, labels, metadata and versions"), modelForm, versionForm));
  detEdit.ready().then(reload).catch((e) => say(modelMessage, false, e.message));
})();

// ---- the workspaces page: create a workspace, create a project in one
(() => {
  const box = document.getElementById("workspace-create");
  if (!box) return;
  const { el } = det;
  const { say } = detEdit;
  const wsName = el("input", { id: "new-workspace-name", placeholder: "workspace name", required: true, "aria-label": "workspace name" });
  const wsMessage = el("span", { id: "new-workspace-message", class: "edit-message" });
  const pWorkspace = el("select", { id: "new-project-workspace", "aria-label": "workspace" });
  const pName = el("input", { id: "new-project-name", placeholder: "project name", required: true, "aria-label": "project name" });
  const pDescription = el("input", { id: "new-project-description", placeholder: "description", "aria-label": "project description" });
  const pMessage = el("span", { id: "new-project-message", class: "edit-message" });

  async function workspaces() {
    const keep = pWorkspace.value;
    const list = (await det.api("/workspaces")).workspaces.filter((w) => !w.archived);
    det.fill(pWorkspace, list.map((w) => el("option", { value: String(w.id) }, w.name)));
    if (list.some((w) => String(w.id) === keep)) pWorkspace.value = keep;
  }

  async function createWorkspace(event) {
    event.preventDefault();
    const answer = await detEdit.send("/workspaces", "POST", { name: wsName.value.trim() });
    if (!answer.ok) { say(wsMessage, false, "Refused by the master: " + answer.message); return; }
    say(wsMessage, true, `Created workspace ${answer.data.workspace.name}.`);
    wsName.value = "";
    await workspaces();
    pWorkspace.value = String(answer.data.workspace.id);
  }

  async function createProject(event) {
    event.preventDefault();
    const answer = await detEdit.send(`/workspaces/${encodeURIComponent(pWorkspace.value)}/projects`, "POST",
      { name: pName.value.trim(), description: pDescription.value });
    if (!answer.ok) { say(pMessage, false, "Refused by the master: " + answer.message); return; }
    say(pMessage, true, `Created project ${answer.data.project.name}.`);
    pName.value = "";
    pDescription.value = "";
  }

  box.className = "create-forms";
  box.replaceChildren(
    el("section", { class: "card" }, el("h2", {}, "New workspace"),
      el("form", { id: "new-workspace-form", onsubmit: createWorkspace }, wsName,
        el("button", { type: "submit", id: "new-workspace-submit" }, "Create"), wsMessage)),
    el("section", { class: "card" }, el("h2", {}, "New project"),
      el("form", { id: "new-project-form", onsubmit: createProject }, pWorkspace, pName, pDescription,
        el("button", { type: "submit", id: "new-project-submit" }, "Create"), pMessage)));
  detEdit.ready().then(workspaces).catch(() => {});
})();
