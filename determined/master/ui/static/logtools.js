// A trial's logs: search them as you type (case-insensitive; lines that arrive later are filtered too) and download
// them all as a text file (every page of GET /trials/{id}/logs, not only what the page has loaded).
"use strict";

(() => {
  const box = document.getElementById("log-tools");
  const logs = document.getElementById("logs");
  if (!box || !logs) return;
  const { el } = det;
  const id = det.config.trialId;
  const search = el("input", { id: "log-search", type: "search", placeholder: "Search the logs", "aria-label": "search the logs" });
  const count = el("span", { id: "log-search-count", class: "muted" });
  const message = el("span", { id: "log-download-message", class: "edit-message" });
  let query = "";

  function apply(line) {
    const hit = !query || line.textContent.toLowerCase().includes(query);
    line.classList.toggle("log-hidden", !hit);
    return hit;
  }

  function filterAll() {
    query = search.value.trim().toLowerCase();
    let shown = 0;
    const lines = logs.querySelectorAll(".log-line");
    for (const line of lines) if (apply(line)) shown++;
    count.textContent = query ? `${shown} of ${lines.length} lines` : "";
  }

  // trial.js appends new lines as they arrive: filter them as well
  new MutationObserver((changes) => {
    if (!query) return;
    for (const change of changes) for (const node of change.addedNodes) if (node.classList && node.classList.contains("log-line")) apply(node);
    const lines = logs.querySelectorAll(".log-line");
    count.textContent = `${logs.querySelectorAll(".log-line:not(.log-hidden)").length} of ${lines.length} lines`;
  }).observe(logs, { childList: true });

  async function download() {
    message.textContent = "";
    const text = [];
    let offset = 0;
    try {
      for (;;) {
        const page = await det.api(`/trials/${id}/logs?offset=${offset}&limit=10000`);
        for (const line of page.logs) text.push(line.message);
        if (page.logs.length < 10000) break;
        offset = page.next_offset;
      }
    } catch (e) {
      detEdit.say(message, false, "Could not download the logs: " + e.message);
      return;
    }
    const url = URL.createObjectURL(new Blob([text.join("\n") + (text.length ? "\n" : "")], { type: "text/plain" }));
    const link = el("a", { href: url, download: `trial-${id}-logs.txt`, class: "hidden" });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
    detEdit.say(message, true, `${text.length} lines`);
  }

  search.addEventListener("input", filterAll);
  box.classList.add("log-tools");
  box.replaceChildren(search, count,
    el("button", { type: "button", id: "log-download", class: "small-button", title: "Every line of the trial's logs as a .txt file",
      onclick: download }, "Download"), message);
})();
