// Bulk actions on the experiments list: tick experiments (the checkbox column: window.detBulkSelect, which
// experiments.js hands to its table), then archive / unarchive / kill / move to a project / add or remove labels /
// delete / compare / open one TensorBoard for them all. Each action calls the CLI's route once per experiment (there is no bulk route: the master checks
// each experiment on its own, as `det experiment archive` does), and every experiment's result is listed: done, or
// the master's refusal in its words.
"use strict";

(() => {
  const bar = document.getElementById("bulk-actions");
  if (!bar) return;
  const { el } = det;
  const selected = new Map(); // id -> the experiment as the list last showed it

  window.detBulkSelect = {
    has: (row) => selected.has(row.id),
    set: (row, checked) => { if (checked) selected.set(row.id, row); else selected.delete(row.id); update(); },
  };

  const count = el("span", { id: "bulk-count", class: "bulk-count" });
  const results = el("ul", { id: "bulk-results", class: "bulk-results", "aria-live": "polite" });
  const labelInput = el("input", { id: "bulk-label", placeholder: "label(s), comma separated", "aria-label": "labels" });
  const projectSelect = el("select", { id: "bulk-project", "aria-label": "move to project" });
  const buttons = [];
  const button = (id, text, onclick, cls) => {
    const b = el("button", { type: "button", id, class: "small-button" + (cls ? " " + cls : ""), onclick });
    b.textContent = text;
    buttons.push(b);
    return b;
  };

  function update() {
    count.textContent = selected.size ? `${selected.size} selected` : "Tick experiments for bulk actions";
    for (const b of buttons) b.disabled = bar.dataset.busy === "1" || (!selected.size && b.id !== "bulk-select-shown");
  }

  // Run `action(id)` (a detEdit.send answer) for every selected experiment, one after the other, and list each result.
  async function each(verb, action, describe) {
    const ids = Array.from(selected.keys()).sort((a, b) => a - b);
    if (!ids.length) return;
    bar.dataset.busy = "1";
    update();
    results.replaceChildren(el("li", { class: "muted" }, `${verb}: ${ids.length} experiment(s)…`));
    const lines = [];
    let done = 0;
    for (const id of ids) {
      let answer;
      try { answer = await action(id); } catch (e) { answer = { ok: false, message: e.message }; }
      if (answer.ok) done++;
      lines.push(el("li", { class: answer.ok ? "ok" : "refused", "data-id": String(id) },
        `Experiment ${id}: ` + (answer.ok ? (describe ? describe(id, answer) : verb.toLowerCase() + " done") : "refused — " + answer.message)));
    }
    results.replaceChildren(el("li", { class: "muted", id: "bulk-summary" },
      `${verb}: ${done} of ${ids.length} done${done < ids.length ? `, ${ids.length - done} refused` : ""}.`), ...lines);
    bar.dataset.busy = "";
    update();
  }

  const post = (what) => (id) => detEdit.send(`/experiments/${id}/${what}`, "POST", {});

  async function labels(add) {
    const wanted = detEdit.labelList(labelInput.value);
    if (!wanted.length) { results.replaceChildren(el("li", { class: "refused" }, "Type one or more labels first.")); return; }
    await each(add ? "Add labels" : "Remove labels", async (id) => {
      const current = await detEdit.send(`/experiments/${id}`, "GET"); // the labels now, not as the list last showed them
      if (!current.ok) return current;
      const now = current.data.experiment.labels || [];
      const next = add ? Array.from(new Set([...now, ...wanted])) : now.filter((l) => !wanted.includes(l));
      return detEdit.send(`/experiments/${id}`, "PATCH", { labels: next });
    }, (id, answer) => "labels now " + ((answer.data.experiment.labels || []).join(", ") || "(none)"));
  }

  async function move() {
    const project = projectSelect.value;
    if (!project) return;
    const name = projectSelect.selectedOptions[0].textContent;
    await each("Move", (id) => detEdit.send(`/experiments/${id}/move`, "POST", { project_id: Number(project) }),
      () => "moved to " + name);
  }

  function confirmed(text) {
    return window.confirm(text);
  }

  bar.classList.add("bulk-bar");
  bar.replaceChildren(
    count,
    el("span", { class: "bulk-group" },
      button("bulk-select-shown", "Select shown", () => {
        document.querySelectorAll("#experiments-table input.row-select").forEach((box) => {
          if (!box.checked) { box.checked = true; box.dispatchEvent(new Event("change")); }
        });
      }),
      button("bulk-clear", "Clear", () => {
        selected.clear();
        document.querySelectorAll("#experiments-table input.row-select").forEach((box) => { box.checked = false; });
        update();
      })),
    el("span", { class: "bulk-group" },
      button("bulk-archive", "Archive", () => each("Archive", post("archive"), () => "archived")),
      button("bulk-unarchive", "Unarchive", () => each("Unarchive", post("unarchive"), () => "unarchived")),
      button("bulk-kill", "Kill", () => {
        if (confirmed(`Kill ${selected.size} experiment(s)? Their trials stop.`)) each("Kill", post("kill"), (id, a) => "now " + a.data.experiment.state);
      }, "danger"),
      button("bulk-delete", "Delete", () => {
        if (confirmed(`Delete ${selected.size} experiment(s) with their checkpoints? This cannot be undone.`)) {
          each("Delete", (id) => detEdit.send(`/experiments/${id}`, "DELETE"), (id, a) => `deleted with ${a.data.deleted_checkpoints.length} checkpoint(s)`)
            .then(() => { for (const li of results.querySelectorAll("li.ok[data-id]")) selected.delete(Number(li.dataset.id)); update(); });
        }
      }, "danger")),
    el("span", { class: "bulk-group" }, labelInput,
      button("bulk-label-add", "Add label", () => labels(true)),
      button("bulk-label-remove", "Remove label", () => labels(false))),
    el("span", { class: "bulk-group" }, projectSelect, button("bulk-move", "Move", move)),
    el("span", { class: "bulk-group" }, button("bulk-compare", "Compare", () => {
      location.href = "/compare?experiments=" + Array.from(selected.keys()).sort((a, b) => a - b).join(",");
    }),
    // One TensorBoard for every selected experiment (tensorboard.js: a running one of exactly them, else a new one).
    button("bulk-tensorboard", "TensorBoard", () => {
      detTensorBoard.open(Array.from(selected.keys()), (text, kind) => {
        results.replaceChildren(el("li", { id: "bulk-tensorboard-status", class: kind === "error" ? "refused" : (kind === "done" ? "ok" : "muted") }, text));
      }).catch(() => {});
    })));
  bar.after(results);
  update();

  detEdit.ready().then(async () => {
    const projects = (await det.api("/projects")).projects.filter((p) => !p.archived);
    det.fill(projectSelect, el("option", { value: "" }, "Move to project…"),
      projects.map((p) => el("option", { value: String(p.id) }, `${p.workspace_name} / ${p.name}`)));
  }).catch(() => {});
})();
