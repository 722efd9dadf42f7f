// A shell task's terminal page (terminal.html): the emulator of terminal.js joined to the master's WebSocket
// /api/v1/shells/{id}/terminal (api/shell_terminal.py): the first message carries the UI's token and the size, then
// keystrokes go as binary messages and sizes as {"cols", "rows"}; the output comes back as binary messages and the
// end as {"exitStatus", "message"}, which the page shows with a Reconnect button.
"use strict";

(() => {
  const id = det.config.taskId;
  const box = document.getElementById("terminal");
  const state = document.getElementById("terminal-state");
  const reconnect = document.getElementById("terminal-reconnect");
  const encoder = new TextEncoder();
  let ws = null;
  let ended = null;  // the master's last word on this connection

  function say(text) { state.textContent = text; }

  const term = new DetTerminal(box, {
    onData: (text) => { if (ws && ws.readyState === WebSocket.OPEN) ws.send(encoder.encode(text)); },
    onResize: (cols, rows) => {
      if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ cols, rows }));
    },
  });

  // The box fills the window below its head; the emulator fits its cells to it.
  function fitBox() {
    const top = box.getBoundingClientRect().top + window.scrollY;
    box.style.height = Math.max(160, window.innerHeight - top - 12) + "px";
    term.fit();
  }

  async function connect() {
    reconnect.classList.add("hidden");
    ended = null;
    say("connecting…");
    let shell;
    try {
      shell = await det.api(`/shells/${encodeURIComponent(id)}`);  // a fresh token (logged in again if it expired)
    } catch (e) {
      say(e.status === 404 ? `No shell ${id}: see the Tasks page.` : `Could not read shell ${id}: ${e.message}`);
      return;
    }
    document.getElementById("terminal-title").textContent = `Terminal · ${shell.task.description}`;
    document.title = `${shell.task.description} · Terminal · Determined`;
    const scheme = location.protocol === "https:" ? "wss" : "ws";
    ws = new WebSocket(`${scheme}://${location.host}/api/v1/shells/${encodeURIComponent(id)}/terminal`);
    ws.binaryType = "arraybuffer";
    ws.onopen = () => {
      ws.send(JSON.stringify({ token: det.token() || "", cols: term.cols, rows: term.rows }));
      say(`connected as ${shell.task.username}`);
      term.focus();
    };
    ws.onmessage = (event) => {
      if (typeof event.data === "string") {
        try { ended = JSON.parse(event.data).message; } catch (e) { ended = event.data; }
      } else {
        term.write(new Uint8Array(event.data));
      }
    };
    ws.onclose = (event) => {
      say(ended || (event.reason ? `closed: ${event.reason}` : "the connection to the master ended"));
      reconnect.classList.remove("hidden");
    };
  }

  reconnect.addEventListener("click", () => connect());
  window.addEventListener("resize", fitBox);
  det.ready().then(() => { fitBox(); return connect(); }).catch((e) => say(e.message));
})();
