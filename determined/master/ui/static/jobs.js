// The Jobs page: the queue of each resource pool in scheduling order (GET /job-queues, as `det job list`), why each
// job waits (the master's `waiting_reason`), and the priority (priority pools) or weight (fair_share pools) that the
// job's owner or an admin may change (POST /job-queues; the master checks the same and its refusal is shown).
"use strict";

(() => {
  const { el } = det;
  const box = document.getElementById("job-queues");
  const poolFilter = document.getElementById("pool-filter");
  const count = document.getElementById("job-count");
  const refused = {}; // job id -> the master's message for its latest refused update
  let last = null; // [pools, jobs, total] of the latest answer

  const fairShare = (pool) => Boolean(pool) && pool.scheduler_type === "SCHEDULER_TYPE_FAIR_SHARE";
  const plural = (n, word) => `${n} ${word}${n === 1 ? "" : "s"}`;

  function nameCell(job) {
    const text = `${job.name} (${job.entity_id})`;
    const href = job.type === "TYPE_EXPERIMENT" ? "/experiments/" + encodeURIComponent(job.entity_id) : "/tasks";
    return el("a", { href, class: "ellipsis job-name" }, text);
  }

  // The priority or weight: a small form for the owner and admins, the plain value for everyone else.
  function editCell(job, pool) {
    const field = fairShare(pool) ? "weight" : "priority";
    const shown = det.fmtNum(job[field]);
    if (!det.mayControl(job.username)) return el("span", { class: "job-value", "data-field": field }, shown);
    const input = el("input", { type: "text", inputmode: field === "priority" ? "numeric" : "decimal", name: field,
      value: shown, size: 4, "aria-label": `${field} of ${job.name}`, oninput: () => { input.dataset.dirty = "1"; } });
    const form = el("form", { class: "job-edit", "data-job": job.job_id, "data-field": field, novalidate: true },
      el("span", { class: "job-edit-controls" }, input, el("button", { type: "submit", class: "small-button" }, "Set")),
      refused[job.job_id] ? el("span", { class: "error job-error", role: "alert" }, refused[job.job_id]) : null);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      update(job, field, input.value, form).catch((e) => det.showStatus(e.message));
    });
    return form;
  }

  // The master decides what is valid (1-99, its priority_limit, a positive weight): its message is shown as is.
  async function update(job, field, raw, form) {
    form.querySelector("button").disabled = true;
    const number = Number(raw);
    const value = raw.trim() === "" ? null : Number.isFinite(number) ? number : raw; // the master names what is wrong
    try {
      await det.api("/job-queues", { method: "POST", body: { updates: [{ job_id: job.job_id, [field]: value }] } });
      delete refused[job.job_id];
    } catch (e) {
      if (!(e instanceof det.ApiError)) throw e;
      refused[job.job_id] = e.message;
    }
    const input = form.querySelector("input");
    if (input) delete input.dataset.dirty;
    await refresh();
  }

  function slotsText(pool) {
    if (pool.slots_available === null || pool.slots_available === undefined) return `${pool.slots_used} slots used`;
    return `${pool.slots_used} of ${plural(pool.slots_available, (pool.slot_type || "") + " slot").trim()} used`;
  }

  function schedulerText(pool) {
    if (fairShare(pool)) return "fair share: slots split by weight";
    return `priority scheduler, preemption ${pool.preemption ? "on" : "off"}, default priority ${pool.default_priority}`;
  }

  function td(label, content, className) {
    return el("td", { "data-label": label, class: className || null }, content);
  }

  function queueTable(jobs, pool) {
    const field = fairShare(pool) ? "Weight" : "Priority";
    const labels = ["#", "Job", "Type", "Name", "User", field, "State", "Slots", "Submitted", "Why it waits"];
    const titles = { "#": "jobs ahead of it in its pool's queue (N/A: it holds slots)",
      Slots: "held / wanted", [field]: field === "Priority" ? "1 runs first, 99 last" : "its share of the pool" };
    const rows = jobs.map((job) => {
      const state = String(job.summary.state).replace("STATE_", "");
      return el("tr", { "data-job": job.job_id, "data-entity": job.entity_id },
        td("#", state === "QUEUED" ? String(job.summary.jobs_ahead) : "N/A", "num"),
        td("Job", el("code", { title: job.job_id }, job.job_id.slice(0, 8))),
        td("Type", String(job.type).replace(/^TYPE_/, "")),
        td("Name", nameCell(job)),
        td("User", job.username),
        td(field, editCell(job, pool), "job-edit-cell"),
        td("State", det.stateBadge(state)),
        td("Slots", `${job.allocated_slots}/${job.requested_slots}`, "num"),
        td("Submitted", el("span", { class: "time" }, det.fmtTime(job.submission_time))),
        td("Why it waits", el("span", { class: "reason job-reason" }, job.waiting_reason || ""),
          job.waiting_reason ? "" : "no-reason"));
    });
    return el("div", { class: "table-wrap" }, el("table", { class: "data queue" },
      el("thead", {}, el("tr", {}, labels.map((l) => el("th", { title: titles[l] || null }, l)))),
      el("tbody", {}, rows)));
  }

  function poolSection(name, pool, jobs) {
    const facts = pool ? [slotsText(pool), schedulerText(pool),
      pool.default_compute_pool ? "default compute pool" : "", pool.default_aux_pool ? "default aux pool" : ""] : [];
    return el("section", { class: "card pool-queue", "data-pool": name },
      el("div", { class: "card-head" }, el("h2", {}, "Pool ", el("span", { class: "pool-name" }, name)),
        el("span", { class: "muted small" }, facts.filter(Boolean).join(" · "))),
      jobs.length ? queueTable(jobs, pool) : el("p", { class: "muted" }, "No job in this pool's queue."));
  }

  // What the user is typing survives the next poll's redraw.
  function keptEdits() {
    const kept = {};
    box.querySelectorAll("form.job-edit input").forEach((input) => {
      if (input.dataset.dirty || document.activeElement === input) {
        kept[input.form.dataset.job] = { value: input.value, dirty: input.dataset.dirty, focused: document.activeElement === input };
      }
    });
    return kept;
  }

  function restoreEdits(kept) {
    for (const [jobId, edit] of Object.entries(kept)) {
      const input = box.querySelector(`form.job-edit[data-job="${CSS.escape(jobId)}"] input`);
      if (!input) continue;
      input.value = edit.value;
      if (edit.dirty) input.dataset.dirty = edit.dirty;
      if (edit.focused) input.focus();
    }
  }

  function choosePools(pools) {
    const wanted = poolFilter.value || new URLSearchParams(location.search).get("pool") || "";
    const names = pools.map((p) => p.name);
    const current = Array.from(poolFilter.options).slice(1).map((o) => o.value);
    if (current.join("\n") !== names.join("\n")) {
      det.fill(poolFilter, el("option", { value: "" }, "All pools"), names.map((n) => el("option", { value: n }, n)));
    }
    poolFilter.value = names.includes(wanted) ? wanted : "";
  }

  function render() {
    if (!last) return;
    const [pools, jobs, total] = last;
    const kept = keptEdits();
    choosePools(pools);
    const byPool = new Map(pools.map((p) => [p.name, []]));
    for (const job of jobs) {
      if (!byPool.has(job.resource_pool)) byPool.set(job.resource_pool, []);
      byPool.get(job.resource_pool).push(job); // the master's order: the pool's scheduling order
    }
    const chosen = poolFilter.value;
    const sections = [];
    for (const [name, queue] of byPool) {
      if (!chosen || name === chosen) sections.push(poolSection(name, pools.find((p) => p.name === name), queue));
    }
    box.replaceChildren(...sections);
    restoreEdits(kept);
    count.textContent = plural(total, "active job") + (total > jobs.length ? ` (the first ${jobs.length} shown)` : "");
  }

  async function refresh() {
    const [pools, queue] = await Promise.all([det.api("/resource-pools"), det.api("/job-queues?limit=1000")]);
    last = [pools.resource_pools, queue.jobs, queue.total];
    render();
  }

  poolFilter.addEventListener("change", () => {
    const url = new URL(location.href);
    if (poolFilter.value) url.searchParams.set("pool", poolFilter.value); else url.searchParams.delete("pool");
    history.replaceState(null, "", url.pathname + url.search);
    render();
  });

  det.ready().then(() => det.poll(refresh, 3000)).catch(() => {});
})();
