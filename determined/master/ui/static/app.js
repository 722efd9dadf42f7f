// Shared by every page: the REST client with its bearer token, login, polling, tables and formatting.
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

  async function request(path, options = {}) {
    const headers = { Accept: "application/json" };
    if (token()) headers.Authorization = "Bearer " + token();
    let body;
    if (options.body !== undefined) {
      body = JSON.stringify(options.body);
      headers["Content-Type"] = "application/json";
    }
    const response = await fetch("/api/v1" + path, { method: options.method || "GET", headers, body });
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
  // login once more (a blank password), and show the login page when that fails too.
  async function api(path, options = {}) {
    try {
      return await request(path, options);
    } catch (e) {
      if (!(e instanceof ApiError) || e.status !== 401 || !config.authEnabled) throw e;
    }
    localStorage.removeItem(TOKEN_KEY);
    try {
      await login("determined", "");
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

  function showStatus(message) {
    const box = document.getElementById("status");
    if (!box) return;
    box.textContent = message || "";
    box.classList.toggle("hidden", !message);
  }

  // Call `fn` now and every `ms` milliseconds after it finishes, until it returns false.
  function poll(fn, ms) {
    let stopped = false;
    async function tick() {
      let again = true;
      try {
        again = (await fn()) !== false;
        showStatus("");
      } catch (e) {
        showStatus(e && e.status === 401 ? "Logging in again…" : "Could not reach the master: " + (e && e.message));
      }
      if (again && !stopped) setTimeout(tick, ms);
    }
    tick();
    return () => { stopped = true; };
  }

  // ---- formatting

  function el(tag, attrs = {}, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value);
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

  function fmtNum(value) {
    if (value === null || value === undefined || value === "") return "";
    if (typeof value !== "number") return String(value);
    if (Number.isInteger(value)) return String(value);
    const abs = Math.abs(value);
    return abs !== 0 && (abs < 1e-3 || abs >= 1e5) ? value.toExponential(4) : value.toPrecision(5).replace(/\.?0+$/, "");
  }

  function fmtTime(iso) {
    if (!iso) return "";
    const date = new Date(iso);
    return isNaN(date) ? iso : date.toLocaleString();
  }

  function fmtDuration(startIso, endIso) {
    if (!startIso) return "";
    const seconds = Math.max(0, ((endIso ? new Date(endIso) : new Date()) - new Date(startIso)) / 1000);
    if (seconds < 60) return Math.round(seconds) + " s";
    if (seconds < 3600) return Math.round(seconds / 60) + " min";
    return (seconds / 3600).toFixed(1) + " h";
  }

  function fmtValue(value) {
    if (value === null || value === undefined) return "";
    if (typeof value === "object") return JSON.stringify(value);
    return fmtNum(value);
  }

  function stateBadge(state) {
    return el("span", { class: "state state-" + String(state || "").toLowerCase() }, state || "");
  }

  function progressBar(fraction) {
    const pct = Math.round(Math.max(0, Math.min(1, fraction || 0)) * 100);
    return el("span", { class: "progress", title: pct + "%" },
      el("span", { class: "progress-fill", style: "width:" + pct + "%" }), el("span", { class: "progress-text" }, pct + "%"));
  }

  function bytes(resources) {
    const total = Object.values(resources || {}).reduce((a, b) => a + (Number(b) || 0), 0);
    if (total < 1024) return total + " B";
    if (total < 1048576) return (total / 1024).toFixed(1) + " KiB";
    return (total / 1048576).toFixed(1) + " MiB";
  }

  // A table sortable by any column: `columns` are {key, label, value(row) for sorting, cell(row) for display}.
  function sortableTable(container, columns, rows, initialSort) {
    if (!container._sort) container._sort = Object.assign({ key: columns[0].key, desc: false }, initialSort || {});
    const sort = container._sort;
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
    const head = el("tr", {}, columns.map((c) => el("th", {
      class: "sortable" + (c.key === sort.key ? (sort.desc ? " sorted-desc" : " sorted-asc") : ""),
      "data-key": c.key,
      onclick: () => {
        if (sort.key === c.key) sort.desc = !sort.desc; else { sort.key = c.key; sort.desc = false; }
        sortableTable(container, columns, rows);
      },
    }, c.label)));
    const body = sorted.map((row) => el("tr", {}, columns.map((c) => {
      const content = c.cell ? c.cell(row) : fmtValue((c.value || ((r) => r[c.key]))(row));
      return el("td", {}, content);
    })));
    const table = el("table", { class: "data" }, el("thead", {}, head), el("tbody", {}, body));
    if (!rows.length) table.append(el("tbody", {}, el("tr", {}, el("td", { colspan: columns.length, class: "muted" }, "Nothing yet."))));
    container.replaceChildren(table);
  }

  function keyValueTable(container, object) {
    const rows = Object.entries(object || {}).map(([k, v]) => el("tr", {}, el("th", {}, k), el("td", {}, fmtValue(v))));
    container.replaceChildren(el("table", { class: "data kv" }, el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { class: "muted" }, "None")))));
  }

  const plotConfig = { displaylogo: false, responsive: true };
  const baseLayout = { margin: { l: 60, r: 20, t: 20, b: 50 }, paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "#fff" };
  function plot(div, traces, layout) {
    return Plotly.react(div, traces, Object.assign({}, baseLayout, layout || {}), plotConfig);
  }

  function markNav() {
    const page = location.pathname.startsWith("/models") ? "models" : location.pathname.startsWith("/cluster") ? "cluster" : "experiments";
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
    config, api, login, logout, ready, sameOriginPath, mayControl, poll, showStatus, el, fill, fmtNum, fmtTime, fmtDuration, fmtValue,
    stateBadge, progressBar, bytes, sortableTable, keyValueTable, plot, ApiError,
  };
})();
