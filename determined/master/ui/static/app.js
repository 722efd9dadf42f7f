// Shared by every page: the REST client with its bearer token, login, polling, tables and formatting.
// The page's settings (the JSON block #det-ui-config, also window.DET_UI) are read here only: pages use det.config.
"use strict";

class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

const det = (() => {
  const TOKEN_KEY = "det_token";
  // The page's settings come in a JSON data block (the Content-Security-Policy runs no inline script).
  const config = (() => {
    const block = document.getElementById("det-ui-config");
    try { return block ? JSON.parse(block.textContent) : { authEnabled: false }; } catch (e) { return { authEnabled: false }; }
  })();
  window.DET_UI = config;
  let currentUser = null;

  const token = () => localStorage.getItem(TOKEN_KEY);

  function toLogin() {
    localStorage.removeItem(TOKEN_KEY);
    if (location.pathname !== "/login") {
      location.href = "/login?next=" + encodeURIComponent(location.pathname + location.search);
    }
  }

  function authHeaders() {
    return token() ? { Authorization: "Bearer " + token() } : {};
  }

  async function request(path, options = {}) {
    const headers = Object.assign({ Accept: "application/json" }, authHeaders());
    let body;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers["Content-Type"] = "application/json";
    }
    const response = await fetch("/api/v1" + path, { method: options.method || "GET", headers, body });
    if (options.raw && response.ok) return response;
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (!response.ok) {
      const detail = data && data.detail;
      const message = typeof detail === "string" ? detail : (detail && detail.message) || response.statusText;
      throw new ApiError(response.status, message);
    }
    return data;
  }

  // Every API call of the pages. A 401 means the token is missing, expired or revoked: try the automatic
  // login once more (a blank password), and show the login page when that fails too. Calls that fail together
  // share one try (the master counts every failed login against the user: docs/auth.md).
  let relogin = null;
  async function api(path, options = {}) {
    try {
      return await request(path, options);
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 401 || !config.authEnabled) throw e;
    }
    localStorage.removeItem(TOKEN_KEY);
    if (!relogin) relogin = login("determined", "").finally(() => { relogin = null; });
    try {
      await relogin;
    } catch (e) {
      toLogin();
      throw e;
    }
    return request(path, options);
  }

  async function login(username, password) {
    const answer = await request("/auth/login", { method: "POST", body: { username, password } });
    localStorage.setItem(TOKEN_KEY, answer.token);
    return answer;
  }

  // Revoke the token on the master (so a copy of it is worthless), forget it here, show the login page.
  async function logout() {
    try {
      if (token()) await request("/auth/logout", { method: "POST", body: {} });
    } catch (e) {
      // an expired or revoked token: nothing left to revoke
    }
    localStorage.removeItem(TOKEN_KEY);
    location.href = "/login";
  }

  // Before a page reads the API: with auth on and no token, log in as `determined` with a blank password
  // (as the CLI does), and show the login page when that fails. Resolves to the user, or null with auth off.
  async function ready() {
    if (!config.authEnabled) return null;
    if (!token()) {
      try {
        await login("determined", "");
      } catch (e) {
        toLogin();
        throw e;
      }
    }
    const me = await api("/me");
    currentUser = (me && (me.user || me)) || null;
    const who = document.getElementById("whoami");
    if (who && currentUser) who.textContent = currentUser.username || "";
    const out = document.getElementById("logout");
    if (out) { out.classList.remove("hidden"); out.onclick = logout; }
    return currentUser;
  }

  // Whether the current user may pause, activate or kill what `owner` owns (everyone while auth is off).
  function mayControl(owner) {
    if (!config.authEnabled) return true;
    if (!currentUser) return false;
    return Boolean(currentUser.admin) || currentUser.username === owner;
  }

  function showStatus(message, stopped = false) {
    const box = document.getElementById("status");
    if (!box) return;
    box.textContent = message || "";
    box.classList.toggle("hidden", !message);
    box.classList.toggle("stopped", Boolean(message) && stopped);
  }

  // What the status line says when a request failed: the master that served this page has stopped (an embedded
  // master ends with its `det experiment create`), or what the master answered.
  function problemText(e) {
    if (e && e.status === 401) return "Logging in again…";
    if (e instanceof ApiError) return `The master answered: ${e.message} (HTTP ${e.status}). Retrying…`;
    return `The master that served this page (${location.host}) has stopped: a \`det experiment create\` run ` +
      "serves its UI only while it runs. The data is kept in its data dir: run `det master up` on the same data dir " +
      "and this page carries on. Retrying…";
  }

  // The page's object does not exist: say so in place of the page's (empty) cards, and stop.
  function notFound(what) {
    const main = document.querySelector("main");
    if (!main || document.getElementById("not-found")) return;
    main.replaceChildren(el("section", { id: "not-found", class: "not-found" },
      el("h1", {}, "Not found"),
      el("p", {}, `${what} does not exist on this master (it may have been deleted).`),
      el("p", {}, el("a", { href: "/" }, "Experiments"), " · ", el("a", { href: "/workspaces" }, "Workspaces"), " · ",
        el("a", { href: "/models" }, "Models"), " · ", el("a", { href: "/cluster" }, "Cluster"))));
    document.title = "Not found · Determined";
  }

  // Call `fn` now and every `ms` milliseconds after it finishes, until it returns false. `options.notFound` names
  // the page's object ("Experiment 12"): a 404 shows that it does not exist, and polling stops.
  function poll(fn, ms, options = {}) {
    let stopped = false;
    async function tick() {
      let again = true;
      try {
        again = (await fn()) !== false;
        showStatus("");
      } catch (e) {
        if (options.notFound && e instanceof ApiError && e.status === 404) {
          notFound(options.notFound);
          return;
        }
        showStatus(problemText(e), !(e instanceof ApiError));
      }
      if (again && !stopped) setTimeout(tick, ms);
    }
    tick();
    return () => { stopped = true; };
  }

  // ---- elements

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key === "style") Object.assign(node.style, value); // CSSOM: allowed by a strict style policy
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : value);
    }
    for (const child of children.flat()) {
      if (child === undefined || child === null) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // Replace the children of `node`, skipping null and undefined ones.
  function fill(node, ...children) {
    node.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== ""));
    return node;
  }

  // ---- formatting: the rules of determined/common/formats.py (the CLI writes the same)

  // Integers as they are; other numbers with 5 significant digits, exponent below 1e-4 and from 1e5 (`{:.5g}`).
  function fmtNum(value) {
    if (value === null || value === undefined || value === "") return "";
    if (typeof value !== "number") return String(value);
    if (Number.isNaN(value)) return "nan";
    if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
    if (Number.isInteger(value) && Math.abs(value) < 1e15) return String(value);
    if (value === 0) return "0";
    const [mantissa, exponent] = value.toExponential(4).split("e");
    const exp = Number(exponent);
    if (exp < -4 || exp >= 5) {
      return mantissa.replace(/\.?0+$/, "") + "e" + (exp < 0 ? "-" : "+") + String(Math.abs(exp)).padStart(2, "0");
    }
    return value.toFixed(Math.max(0, 4 - exp)).replace(/(\.\d*?)0+$/, "$1").replace(/\.$/, "");
  }

  const pad2 = (n) => String(n).padStart(2, "0");

  // Local time, YYYY-MM-DD HH:MM:SS.
  function fmtTime(iso) {
    if (!iso) return "";
    const d = new Date(iso);
    if (isNaN(d)) return String(iso);
    return `${d.getFullYear()}-${pad2(d.getMonth() + 1)}-${pad2(d.getDate())} ` +
      `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
  }

  function fmtSeconds(seconds) {
    if (seconds === null || seconds === undefined || isNaN(seconds)) return "";
    const s = Math.max(0, Math.round(seconds));
    if (s < 60) return `${s}s`;
    if (s < 3600) return `${Math.floor(s / 60)}m ${pad2(s % 60)}s`;
    if (s < 86400) return `${Math.floor(s / 3600)}h ${pad2(Math.floor((s % 3600) / 60))}m`;
    return `${Math.floor(s / 86400)}d ${pad2(Math.floor((s % 86400) / 3600))}h`;
  }

  // A trial's duration in seconds: from its first run's start until it stopped training. That is its end once
  // it ended, now while it runs, and when it stopped training while it waits (the master's
  // stopped_training_time; else its last report, `lastReport`, the time of its latest metrics), so the number
  // neither grows while the trial waits nor drops when it ends.
  function trialSeconds(trial, lastReport, now) {
    if (!trial || !trial.start_time) return null;
    const start = Date.parse(trial.start_time);
    let end;
    if (trial.end_time) end = Date.parse(trial.end_time);
    else if ((trial.status || "RUNNING") !== "RUNNING" && trial.stopped_training_time) {
      end = Date.parse(trial.stopped_training_time);
    } else if ((trial.status || "RUNNING") === "RUNNING" || !lastReport) end = now === undefined ? Date.now() : now;
    else end = Date.parse(lastReport);
    return Math.max(0, (end - start) / 1000);
  }

  // The time of the latest point of some metric series ([{end_time}]), or null.
  function lastReport(...series) {
    let best = null;
    for (const points of series) {
      const last = (points || [])[(points || []).length - 1];
      if (last && last.end_time && (!best || Date.parse(last.end_time) > Date.parse(best))) best = last.end_time;
    }
    return best;
  }

  function fmtDuration(startIso, endIso) {
    if (!startIso) return "";
    return fmtSeconds(((endIso ? new Date(endIso) : new Date()) - new Date(startIso)) / 1000);
  }

  function fmtValue(value) {
    if (value === null || value === undefined) return "";
    if (typeof value === "object") return JSON.stringify(value);
    return fmtNum(value);
  }

  function fmtBytes(total) {
    total = Number(total) || 0;
    if (total < 1024) return total + " B";
    const units = ["KiB", "MiB", "GiB"];
    let value = total / 1024;
    let i = 0;
    while (value >= 1024 && i < units.length - 1) { value /= 1024; i++; }
    return value.toFixed(1) + " " + units[i];
  }

  function bytes(resources) {
    return fmtBytes(Object.values(resources || {}).reduce((a, b) => a + (Number(b) || 0), 0));
  }

  function stateBadge(state, title) {
    return el("span", { class: "state state-" + String(state || "").toLowerCase(), title: title || null }, state || "");
  }

  function progressBar(fraction) {
    const value = Math.max(0, Math.min(1, fraction || 0));
    const pct = Math.round(value * 1000) / 10;
    return el("span", { class: "progress", title: pct + "%", "data-progress": String(value) },
      el("span", { class: "progress-fill", style: { width: pct + "%" } }), el("span", { class: "progress-text" }, pct + "%"));
  }

  // Nested hyperparameters as dotted names: {"optim": {"lr": 0.1}} -> {"optim.lr": 0.1} (an empty object is a value).
  function flatten(object, prefix = "") {
    const out = {};
    for (const [key, value] of Object.entries(object || {})) {
      if (value && typeof value === "object" && !Array.isArray(value) && Object.keys(value).length) {
        Object.assign(out, flatten(value, prefix + key + "."));
      } else out[prefix + key] = value;
    }
    return out;
  }

  // The searched (non-constant) hyperparameters of an experiment as the master lists them: nested ones under
  // dotted names, each with its path in a trial's values and its spec; sorted by name.
  function searchedHparams(exp) {
    return (exp.searched_hparams || []).map((h) => ({ name: h.name, path: h.path || [h.name], spec: h.spec || { type: h.type } }))
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  // A trial's value of the hyperparameter at `path` (["optim", "lr"]).
  function hparamValue(hparams, path) {
    return path.reduce((v, key) => (v !== null && typeof v === "object" ? v[key] : undefined), hparams);
  }

  // ---- tables

  function prefsOf(name) {
    try { return JSON.parse(localStorage.getItem("det_columns:" + name) || "{}"); } catch (e) { return {}; }
  }

  function savePrefs(name, prefs) {
    localStorage.setItem("det_columns:" + name, JSON.stringify(prefs));
  }

  // A table sortable by any column: `columns` are {key, label, value(row) for sorting, cell(row) for display,
  // optional: "hparam" | "metric" | true (may be hidden), pinned: true}. With `options.name` the table has a column
  // chooser (choices kept in localStorage) and fits its container: optional columns the user did not ask for are
  // hidden when it would be wider, hyperparameters first. Pinned columns stay in view when it scrolls.
  // `options.select` = {has(row), set(row, checked)} adds a checkbox column.
  function sortableTable(container, columns, rows, initialSort, options = {}) {
    if (!container._sort) container._sort = Object.assign({ key: columns[0].key, desc: false }, initialSort || {});
    container._args = [columns, rows, initialSort, options];
    if (options.name) fitted.add(container);
    const sort = container._sort;
    const prefs = options.name ? prefsOf(options.name) : {};
    const autoHidden = container._autoHidden || new Set();
    const visible = columns.filter((c) => prefs[c.key] !== false && !(autoHidden.has(c.key) && prefs[c.key] !== true));
    // hyperparameters hidden to fit collapse into one column: `name=value ...`
    const collapsed = columns.filter((c) => c.optional === "hparam" && !visible.includes(c) && prefs[c.key] !== false);
    if (collapsed.length) {
      const at = visible.findIndex((c) => columns.indexOf(c) > columns.indexOf(collapsed[0]));
      const pairs = (row) => collapsed.map((c) => `${c.label}=${fmtValue((c.value || ((r) => r[c.key]))(row))}`);
      const text = (row) => pairs(row).join(" ");
      visible.splice(at < 0 ? visible.length : at, 0, { key: "hparams", label: "Hyperparameters", value: text,
        cell: (row) => el("span", { class: "collapsed-hparams" }, pairs(row).map((p) => el("span", {}, p))) });
    }
    const column = columns.find((c) => c.key === sort.key) || columns[0];
    const valueOf = column.value || ((row) => row[column.key]);
    const sorted = rows.slice().sort((a, b) => {
      const x = valueOf(a), y = valueOf(b);
      const missingX = x === null || x === undefined || x === "" || (typeof x === "number" && isNaN(x));
      const missingY = y === null || y === undefined || y === "" || (typeof y === "number" && isNaN(y));
      if (missingX || missingY) return missingX === missingY ? 0 : missingX ? 1 : -1;
      const order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y), undefined, { numeric: true });
      return sort.desc ? -order : order;
    });
    const rerender = () => sortableTable(container, ...container._args);
    const select = options.select;
    const headCells = visible.map((c) => el("th", {
      class: "sortable" + (c.pinned ? " pinned" : "") + (c.key === sort.key ? (sort.desc ? " sorted-desc" : " sorted-asc") : ""),
      "data-key": c.key, title: c.title || null,
      onclick: () => {
        if (sort.key === c.key) sort.desc = !sort.desc; else { sort.key = c.key; sort.desc = false; }
        rerender();
      },
    }, c.label));
    if (select) headCells.unshift(el("th", { class: "pinned select-col", title: "Tick trials to compare them" }, "✓"));
    const body = sorted.map((row) => {
      const cells = visible.map((c) => {
        const content = c.cell ? c.cell(row) : fmtValue((c.value || ((r) => r[c.key]))(row));
        return el("td", { class: [c.pinned && "pinned", c.numeric && "num", c.className].filter(Boolean).join(" ") || null }, content);
      });
      if (select) {
        cells.unshift(el("td", { class: "pinned select-col" }, el("input", {
          type: "checkbox", class: "row-select", "data-id": String(row.id), checked: select.has(row),
          onchange: (e) => select.set(row, e.target.checked),
        })));
      }
      return el("tr", {}, cells);
    });
    const table = el("table", { class: "data" }, el("thead", {}, el("tr", {}, headCells)), el("tbody", {}, body));
    if (!rows.length) table.append(el("tbody", {}, el("tr", {}, el("td", { colspan: headCells.length, class: "muted" }, options.empty || "Nothing yet."))));
    const wrap = container._wrap || (container._wrap = el("div", { class: "table-scroll" }));
    wrap.replaceChildren(table);
    const parts = [wrap];
    if (options.name) parts.unshift(chooser(container, columns, prefs, autoHidden, options.name, rerender));
    if (container.firstChild !== parts[0] || container.childNodes.length !== parts.length) container.replaceChildren(...parts);
    pinColumns(table);
    if (options.name && fitColumns(container, wrap, table, columns, visible, prefs, autoHidden)) rerender();
  }

  // Tables that fit their container fit again when the window changes size.
  const fitted = new Set();
  let resizeTimer = null;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => {
      for (const container of fitted) {
        if (!container.isConnected) { fitted.delete(container); continue; }
        container._autoHidden = new Set();
        sortableTable(container, ...container._args);
      }
    }, 150);
  });

  // Hide optional columns the user did not ask for until the table fits its container (hyperparameters from the
  // last, then metrics, then other optional columns); returns whether anything changed.
  function fitColumns(container, wrap, table, columns, visible, prefs, autoHidden) {
    const room = wrap.clientWidth;
    if (!room) return false;
    let excess = table.scrollWidth - room;
    if (excess <= 1) {
      if (!autoHidden.size || container._fitWidth === room) return false;
      container._fitWidth = room; // wider now: show what was hidden and fit again
      container._autoHidden = new Set();
      return true;
    }
    const rank = (c) => (c.optional === "hparam" ? 0 : c.optional === "metric" ? 1 : 2);
    const candidates = visible.filter((c) => c.optional && prefs[c.key] !== true)
      .sort((a, b) => rank(a) - rank(b) || columns.indexOf(b) - columns.indexOf(a));
    const heads = Array.from(table.tHead.rows[0].cells).filter((th) => th.dataset.key);
    const next = new Set(autoHidden);
    for (const c of candidates) {
      if (excess <= 1) break;
      const th = heads.find((h) => h.dataset.key === c.key);
      next.add(c.key);
      excess -= th ? th.offsetWidth : 0;
    }
    if (next.size === autoHidden.size) return false;
    container._autoHidden = next;
    container._fitWidth = room;
    return true;
  }

  function chooser(container, columns, prefs, autoHidden, name, rerender) {
    const box = container._chooser || (container._chooser = el("details", { class: "col-chooser" }, el("summary"), el("div", { class: "col-menu" })));
    const hidden = columns.filter((c) => prefs[c.key] === false || (autoHidden.has(c.key) && prefs[c.key] !== true));
    box.firstChild.textContent = `Columns${hidden.length ? ` (${hidden.length} hidden)` : ""}`;
    const menu = box.lastChild;
    menu.replaceChildren(...columns.map((c) => {
      const shown = !hidden.includes(c);
      const auto = autoHidden.has(c.key) && prefs[c.key] === undefined;
      return el("label", { class: "col-option" }, el("input", {
        type: "checkbox", "data-key": c.key, checked: shown, disabled: c.pinned ? true : null,
        onchange: (e) => { const p = prefsOf(name); p[c.key] = e.target.checked; savePrefs(name, p); rerender(); },
      }), " " + c.label, auto ? el("span", { class: "muted small" }, " (hidden to fit)") : null);
    }), el("button", { type: "button", class: "link-button", onclick: () => { savePrefs(name, {}); container._autoHidden = new Set(); rerender(); } }, "Reset"));
    return box;
  }

  // Pinned columns stay at the left edge while the table scrolls sideways.
  function pinColumns(table) {
    const head = table.tHead && table.tHead.rows[0];
    if (!head) return;
    const offsets = [];
    let left = 0;
    for (const th of head.cells) {
      if (!th.classList.contains("pinned")) break;
      offsets.push(left);
      left += th.offsetWidth;
    }
    for (const row of table.rows) {
      offsets.forEach((offset, i) => { if (row.cells[i]) row.cells[i].style.left = offset + "px"; });
    }
  }

  function keyValueTable(container, object) {
    const rows = Object.entries(object || {}).map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, fmtValue(v))));
    container.replaceChildren(el("table", { class: "data kv" }, el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { class: "muted" }, "None")))));
  }

  // ---- charts: plotly, with nothing that sends data anywhere (no cloud export, no links out)

  const plotConfig = {
    displaylogo: false, responsive: true, showLink: false, showSendToCloud: false, showEditInChartStudio: false,
    plotlyServerURL: "", modeBarButtonsToRemove: ["sendChartToCloud", "sendDataToCloud", "editInChartStudio", "select2d", "lasso2d",
      "zoomIn2d", "zoomOut2d", "autoScale2d", "toggleSpikelines", "hoverClosestCartesian", "hoverCompareCartesian"],
  };
  // Legends go below the plot (never over it, never eating a narrow chart's width), and the chart grows by the
  // rows its legend needs at its width.
  const baseLayout = { margin: { l: 60, r: 20, t: 30, b: 50 }, paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "#fff" };
  function legendBelow(node, traces, layout) {
    const named = traces.filter((t) => t.name && t.showlegend !== false && t.type !== "parcoords");
    if (layout.showlegend === false || named.length < 2) return layout;
    const width = Math.max(200, (node && node.clientWidth) || 600);
    let rows = 1, used = 0;
    for (const t of named) {
      const w = 40 + 6.5 * String(t.name).length;
      if (used && used + w > width - 30) { rows += 1; used = 0; }
      used += w;
    }
    const room = rows * 21 + 12;
    return Object.assign({}, layout, { height: (layout.height || 380) + room,
      legend: { orientation: "h", x: 0, xanchor: "left", yref: "container", y: 0, yanchor: "bottom", traceorder: "normal",
        tracegroupgap: 0 },
      margin: Object.assign({}, baseLayout.margin, layout.margin || {}, { b: ((layout.margin || {}).b || baseLayout.margin.b) + room }) });
  }
  function plot(div, traces, layout) {
    const node = typeof div === "string" ? document.getElementById(div) : div;
    return Plotly.react(div, traces, legendBelow(node, traces, Object.assign({}, baseLayout, layout || {})), plotConfig);
  }

  // ---- checkpoints: download, copy the uuid, register in a model

  async function downloadCheckpoint(uuid) {
    showStatus(`Preparing checkpoint ${uuid}…`);
    try {
      const response = await request(`/checkpoints/${encodeURIComponent(uuid)}/files`, { raw: true });
      const url = URL.createObjectURL(await response.blob());
      const link = el("a", { href: url, download: uuid + ".tar", class: "hidden" });
      document.body.append(link);
      link.click();
      link.remove();
      setTimeout(() => URL.revokeObjectURL(url), 60000);
      showStatus("");
    } catch (e) {
      showStatus(`Could not download checkpoint ${uuid}: ${e.message}`);
    }
  }

  async function copyText(text, button) {
    try {
      await navigator.clipboard.writeText(text);
    } catch (e) { // no clipboard permission: select it for Ctrl-C instead
      window.prompt("Copy the uuid:", text);
      return;
    }
    if (button) {
      const label = button.textContent;
      button.textContent = "Copied";
      setTimeout(() => { button.textContent = label; }, 1500);
    }
  }

  let registerDialog = null;
  function registerCheckpoint(uuid, onDone) {
    if (!registerDialog) {
      registerDialog = el("dialog", { id: "register-dialog", class: "dialog" },
        el("form", { method: "dialog" },
          el("h2", {}, "Register in a model"),
          el("p", { class: "muted small", id: "register-uuid" }),
          el("label", {}, "Model ", el("input", { id: "register-model", list: "register-models", required: true, size: 30,
            placeholder: "an existing model, or a new name" })),
          el("datalist", { id: "register-models" }),
          el("label", {}, "Description (new models) ", el("input", { id: "register-description", size: 30 })),
          el("p", { id: "register-error", class: "error" }),
          el("div", { class: "actions" },
            el("button", { type: "button", id: "register-cancel", onclick: () => registerDialog.close() }, "Cancel"),
            el("button", { type: "submit", id: "register-submit" }, "Register"))));
      document.body.append(registerDialog);
    }
    const form = registerDialog.querySelector("form");
    document.getElementById("register-uuid").textContent = "Checkpoint " + uuid;
    document.getElementById("register-error").textContent = "";
    api("/models").then((d) => fill(document.getElementById("register-models"),
      d.models.map((m) => el("option", { value: m.name })))).catch(() => {});
    form.onsubmit = async (event) => {
      event.preventDefault();
      const name = document.getElementById("register-model").value.trim();
      const description = document.getElementById("register-description").value;
      try {
        const known = (await api(`/models?name=${encodeURIComponent(name)}`)).models.some((m) => m.name === name);
        if (!known) await api(`/models/${encodeURIComponent(name)}`, { method: "POST", body: { description, metadata: {} } });
        const v = (await api(`/models/${encodeURIComponent(name)}/versions`, { method: "POST", body: { checkpoint_uuid: uuid } })).version;
        registerDialog.close();
        showStatus(`Registered checkpoint ${uuid} as version ${v.version} of model ${name}.`);
        if (onDone) onDone(v);
      } catch (e) {
        document.getElementById("register-error").textContent = e.message;
      }
    };
    registerDialog.showModal();
  }

  function checkpointActions(c, onChange) {
    const copy = el("button", { type: "button", class: "small-button", "data-action": "copy", title: "Copy the uuid" }, "Copy uuid");
    copy.addEventListener("click", () => copyText(c.uuid, copy));
    const done = c.state === "COMPLETED";
    return el("span", { class: "ckpt-actions" },
      el("button", { type: "button", class: "small-button", "data-action": "download", disabled: !done,
        title: "Download its files as .tar.gz", onclick: () => downloadCheckpoint(c.uuid) }, "Download"),
      copy,
      el("button", { type: "button", class: "small-button", "data-action": "register", disabled: !done,
        title: "Register as a version of a model", onclick: () => registerCheckpoint(c.uuid, onChange) }, "Register"));
  }

  // ---- config as YAML (read-only)

  function yamlText(value, indent = "") {
    const scalar = (v) => {
      if (v === null || v === undefined) return "null";
      if (typeof v === "string") return /^[\w./:@+-][\w ./:@+-]*$/.test(v) && !/^(true|false|null|yes|no|on|off|[\d.eE+-]+)$/i.test(v) ? v : JSON.stringify(v);
      return String(v);
    };
    if (Array.isArray(value)) {
      if (!value.length) return "[]";
      return value.map((v) => (v && typeof v === "object" && Object.keys(v).length
        ? `${indent}- ${yamlText(v, indent + "  ").trimStart()}` : `${indent}- ${v && typeof v === "object" ? yamlText(v) : scalar(v)}`)).join("\n");
    }
    if (value && typeof value === "object") {
      const keys = Object.keys(value);
      if (!keys.length) return "{}";
      return keys.map((k) => {
        const v = value[k];
        if (v && typeof v === "object" && (Array.isArray(v) ? v.length : Object.keys(v).length)) {
          return `${indent}${scalar(k)}:\n${yamlText(v, indent + "  ")}`;
        }
        return `${indent}${scalar(k)}: ${v && typeof v === "object" ? yamlText(v) : scalar(v)}`;
      }).join("\n");
    }
    return indent + scalar(value);
  }

  function markNav() {
    const page = location.pathname.startsWith("/models") ? "models" : location.pathname.startsWith("/cluster") ? "cluster"
      : location.pathname.startsWith("/workspaces") ? "workspaces" : location.pathname.startsWith("/tasks") ? "tasks"
      : location.pathname.startsWith("/jobs") ? "jobs" : "experiments";
    document.querySelectorAll("[data-nav]").forEach((a) => a.classList.toggle("current", a.dataset.nav === page));
  }
  document.addEventListener("DOMContentLoaded", markNav);

  // Where the login page may send the user next: a path of this master, never another site. The browser's URL
  // parser decides (it reads `\` as `/`, drops tabs and newlines), so `//evil`, `/\evil`, `/\t/evil`, `https:evil`
  // and their encoded forms all give "/"; so does a path that would start with `//` once normalised.
  function sameOriginPath(next) {
    if (typeof next !== "string" || !next.startsWith("/")) return "/";
    let url;
    try { url = new URL(next, location.origin); } catch (e) { return "/"; }
    if (url.origin !== location.origin || url.pathname.startsWith("//")) return "/";
    return url.pathname + url.search + url.hash;
  }

  return {
    config, api, token, login, logout, ready, sameOriginPath, mayControl, poll, showStatus, el, fill, fmtNum, fmtTime,
    fmtSeconds, fmtDuration, trialSeconds, lastReport, notFound, fmtValue, fmtBytes, stateBadge, progressBar, bytes, flatten, searchedHparams, hparamValue,
    sortableTable, keyValueTable, plot, plotConfig, checkpointActions, downloadCheckpoint, copyText, registerCheckpoint,
    yamlText, ApiError,
  };
})();
