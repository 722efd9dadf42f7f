// "Open TensorBoard" (the experiment page) and "TensorBoard" (the experiments list's selection): reuse a TensorBoard
// task of exactly these experiments that runs or starts (GET /tensorboards?active=true: every user may open one,
// as they may read its experiments), else launch one (POST /tensorboards, the route of `det tensorboard start`);
// follow its state until it answers, then open it in a new tab through the master's proxy with a one-time address
// (POST /tasks/{id}/open -> /proxy/<id>/?det_open=...). A TensorBoard that ends before it answers is reported with
// the reason the master recorded and, when its logs say so, that TensorBoard is not installed.
"use strict";

const detTensorBoard = (() => {
  const WAIT_MS = 180000; // TensorBoard reads every trial's event files before it answers
  const LIVE = ["STATE_QUEUED", "STATE_STARTING", "STATE_RUNNING"];
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const sorted = (ids) => Array.from(new Set(ids.map(Number))).sort((a, b) => a - b);
  const same = (a, b) => a.length === b.length && a.every((x, i) => x === b[i]);
  const shortId = (t) => t.id.slice(0, 8);

  async function existing(ids) {
    const tasks = (await det.api("/tensorboards?active=true")).tasks
      .filter((t) => LIVE.includes(t.state) && same(sorted(t.experimentIds || []), ids));
    return tasks.find((t) => t.state === "STATE_RUNNING") || tasks[0] || null;
  }

  // The experiments whose trials have reported nothing yet: TensorBoard shows the metrics of its start.
  async function withoutMetrics(ids) {
    const empty = [];
    for (const id of ids.slice(0, 20)) {
      try {
        const answer = await det.api(`/experiments/${id}`);
        const reported = (answer.trials || []).some((t) => t.total_batches > 0 || t.best_validation !== null);
        if (!reported && answer.experiment.best_validation === null) empty.push(id);
      } catch (e) { /* the launch names an experiment that cannot be read */ }
    }
    return empty;
  }

  async function whyEnded(t) {
    let lines = [];
    try {
      lines = (await det.api(`/tasks/${t.id}/logs?tail=30`)).logs.map((l) => l.message);
    } catch (e) { /* its logs are its owner's and the admins' */ }
    if (lines.some((l) => /No module named '?tensorboard/.test(l))) {
      return "TensorBoard is not installed where the master runs tasks: pip install 'determined-revived[tensorboard]' " +
        "into the master's environment, then try again";
    }
    const last = lines.filter((l) => !/^(task ended|started \(|note: )/.test(l)).slice(-1)[0];
    return `it ended: ${t.exitStatus || "no reason recorded"}${last ? ` (last log line: ${last})` : ""}`;
  }

  function hold(popup) {
    if (!popup) return;
    try {
      popup.document.title = "Starting TensorBoard…";
      popup.document.body.textContent = "Starting TensorBoard… this tab opens it when it answers.";
    } catch (e) { /* another origin already */ }
  }

  // Opens TensorBoard for `experimentIds`; `say(text, kind)` shows where it stands ("progress", "done", "error").
  // Resolves to the task, or rejects with the reason it could not be opened (said already).
  async function open(experimentIds, say) {
    const ids = sorted(experimentIds);
    const popup = window.open("", "_blank"); // now, while the click counts as the user's
    hold(popup);
    const names = ids.length === 1 ? `experiment ${ids[0]}` : `experiments ${ids.join(", ")}`;
    try {
      let task = await existing(ids);
      let note = "";
      if (!task) {
        const empty = await withoutMetrics(ids);
        if (empty.length) {
          note = ` (${empty.length === ids.length && ids.length === 1 ? "this experiment" : "experiment " + empty.join(", ")} ` +
            "has no metrics yet: TensorBoard shows the metrics as of its start; open it again once trials report)";
        }
        say(`Launching TensorBoard for ${names}…${note}`, "progress");
        task = (await det.api("/tensorboards", { method: "POST", body: { experiment_ids: ids } })).task;
      }
      const started = Date.now();
      while (task.state !== "STATE_RUNNING") {
        if (task.state === "STATE_TERMINATED" || task.state === "STATE_TERMINATING") {
          throw new Error(`TensorBoard ${shortId(task)} did not start: ${await whyEnded(task)}`);
        }
        if (Date.now() - started > WAIT_MS) {
          throw new Error(`TensorBoard ${shortId(task)} is still ${task.state.replace("STATE_", "")} after ` +
            `${WAIT_MS / 1000} s; see its logs on the Tasks page`);
        }
        say(`TensorBoard ${shortId(task)} for ${names}: ${task.state.replace("STATE_", "")} ` +
          `(${Math.round((Date.now() - started) / 1000)} s)…${note}`, "progress");
        await sleep(1000);
        task = (await det.api(`/tensorboards/${task.id}`)).task;
      }
      const { url } = await det.api(`/tasks/${task.id}/open`, { method: "POST", body: {} });
      if (popup && !popup.closed) popup.location.href = url; else location.href = url; // a blocked pop-up: here
      say(`TensorBoard ${shortId(task)} for ${names} is open in a new tab.${note}`, "done");
      return task;
    } catch (e) {
      if (popup) popup.close();
      say(`Could not open TensorBoard for ${names}: ${e.message}`, "error");
      throw e;
    }
  }

  return { open };
})();
