// DetTerminal: a small terminal emulator for the web UI's terminal in the browser, written for this project (no
// library). It speaks the xterm-like VT100/ANSI subset that bash, ls --color, less, top, nano and vim use, renders into
// the DOM and turns keys, typed text and pastes into terminal input. The page wires it to a shell's stream:
//
//   const term = new DetTerminal(container, { onData, onResize, scrollback: 1000 });
//   term.write(bytesOrString); term.fit(); term.resize(cols, rows); term.focus(); term.dispose();
//   term.cols, term.rows, term.title; term.text(), term.cursor(), term.cellAttrs(x, y) (for tests)
//
// Supported
// - UTF-8 across write() calls (TextDecoder, stream: true); combining marks join the previous cell.
// - C0: BEL (ignored), BS, HT (tab stops every 8, ESC H, CSI g), LF/VT/FF, CR, SO/SI; CAN/SUB cancel a sequence;
//   the 8-bit C1 forms of IND, NEL, HTS, RI, CSI, OSC, DCS... act like their ESC forms.
// - Auto-wrap with a pending wrap at the last column (DECAWM ?7), insert mode (CSI 4 h/l).
// - ESC 7/8, D, E, M, H, c; ESC ( 0 / ESC ) 0 DEC line drawing (other charsets are plain ASCII); ESC = / > ignored.
// - CSI A B C D E F G H f J (0-3) K (0-2) L M P @ X S T d ` a e b I Z g m r s u n (5, 6) c h l, CSI ! p (soft reset).
//   SGR: bold, dim, italic, underline, inverse, hidden, strike and their resets; 16, 256 and 24-bit colors
//   (38;5;n, 38;2;r;g;b, and the colon forms 38:5:n, 38:2::r:g:b, 4:0 / 4:n).
// - DEC private modes: 1 (application cursor keys), 6 (origin), 7, 25 (cursor visible), 47/1047/1049 (alternate
//   screen, cleared on entry, no scrollback; 1049 saves and restores the cursor), 2004 (bracketed paste).
// - OSC 0/2 set `term.title`; other OSCs and DCS/SOS/PM/APC strings are consumed up to BEL or ST.
// - Erases (ED, EL, ECH, ICH, DCH, IL, DL, scrolling) fill with the current background color.
// - Scrollback: lines scrolled off the top of the main screen (LF/IND with the region starting at the top row) are
//   kept, up to `scrollback`, and rendered above the screen; output keeps the view at the bottom unless the user
//   scrolled up (typing scrolls back down).
// - Replies through onData: DSR 5 ("\x1b[0n"), DSR 6 (cursor position), DA ("\x1b[?1;2c").
// Not supported (consumed and ignored): mouse reporting, focus events, the secondary DA and other queries (DECRQM,
// XTVERSION, window ops), wide characters (every character is one cell), reflow of wrapped lines on resize, blinking,
// bold-as-bright, left/right margins, double-width lines, sixel; fit() is not called by itself (the page calls it).
//
// Input: a hidden <textarea> in the container holds the focus (a phone's soft keyboard works; a click or tap on the
// terminal focuses it unless it selected text). keydown sends the special keys, Ctrl+key and Alt+key (and
// preventDefaults them, so nothing is sent twice); printable text arrives through the textarea's input and
// composition events. Alt acts as Meta (an ESC prefix) unless the key is AltGr; Cmd+key (a Mac) is the browser's.
// Copy and paste: while text is selected in the terminal, Ctrl+C and Ctrl+Shift+C copy it (without a selection Ctrl+C
// sends "\x03"); Ctrl+Shift+V, Cmd+V and the browser's menu paste (the paste event: "\n" sent as "\r", wrapped in
// ESC [200~ ... ESC [201~ under bracketed paste). Typing after selecting text goes to the terminal and clears the
// selection. Composed text (an IME, a phone keyboard that composes words) is sent when committed (compositionend).
// onResize is called by fit() when the size changes (not by resize()).
"use strict";

(() => {
  const DEFAULT_FG = "#d4d4d4";
  const DEFAULT_BG = "#1e1e1e";
  const PALETTE = ["#000000", "#cd3131", "#0dbc79", "#e5e510", "#2472c8", "#bc3fbc", "#11a8cd", "#e5e5e5",
    "#666666", "#f14c4c", "#23d18b", "#f5f543", "#3b8eea", "#d670d6", "#29b8db", "#ffffff"];
  const BOLD = 1, DIM = 2, ITALIC = 4, UNDERLINE = 8, INVERSE = 16, HIDDEN = 32, STRIKE = 64;
  const SGR_SET = { 1: BOLD, 2: DIM, 3: ITALIC, 4: UNDERLINE, 7: INVERSE, 8: HIDDEN, 9: STRIKE };
  const SGR_RESET = { 22: BOLD | DIM, 23: ITALIC, 24: UNDERLINE, 27: INVERSE, 28: HIDDEN, 29: STRIKE };
  const DEC_GRAPHICS = { "`": "◆", a: "▒", f: "°", g: "±", j: "┘", k: "┐", l: "┌", m: "└", n: "┼", o: "⎺", p: "⎻",
    q: "─", r: "⎼", s: "⎽", t: "├", u: "┤", v: "┴", w: "┬", x: "│", y: "≤", z: "≥", "{": "π", "|": "≠", "}": "£",
    "~": "·" };
  const COMBINING = /^\p{M}/u;
  const GROUND = 0, ESC = 1, ESC_INTER = 2, CSI = 3, OSC = 4, STRING = 5;  // parser states
  const MAX_OSC = 4096;

  // Keys sent by keydown (the rest comes through the textarea's input events).
  const CURSOR_KEYS = { ArrowUp: "A", ArrowDown: "B", ArrowRight: "C", ArrowLeft: "D", Home: "H", End: "F" };
  const TILDE_KEYS = { Insert: 2, Delete: 3, PageUp: 5, PageDown: 6, F5: 15, F6: 17, F7: 18, F8: 19, F9: 20,
    F10: 21, F11: 23, F12: 24 };
  const SS3_KEYS = { F1: "P", F2: "Q", F3: "R", F4: "S" };
  const CTRL_SYMBOLS = { " ": 0, "@": 0, "2": 0, "[": 27, "3": 27, "\\": 28, "4": 28, "]": 29, "5": 29, "^": 30,
    "6": 30, "_": 31, "-": 31, "7": 31, "/": 31, "?": 127, "8": 127 };

  const clamp = (v, lo, hi) => Math.max(lo, Math.min(hi, v));
  const hex = (r, g, b) => "#" + [r, g, b].map((v) => clamp(v, 0, 255).toString(16).padStart(2, "0")).join("");
  const has = (table, key) => Object.prototype.hasOwnProperty.call(table, key);

  function color256(n) {
    if (n < 16) return PALETTE[n];
    if (n < 232) {
      const steps = [0, 95, 135, 175, 215, 255];
      n -= 16;
      return hex(steps[Math.floor(n / 36)], steps[Math.floor(n / 6) % 6], steps[n % 6]);
    }
    const gray = 8 + (n - 232) * 10;
    return hex(gray, gray, gray);
  }

  // An extended color from SGR 38/48/58's arguments `v` (5;n or 2;r;g;b; the colon form may carry a color space
  // id before r:g:b): [the CSS color or undefined, how many arguments it used].
  function extendedColor(v, colon) {
    if (v[0] === 5) return [v[1] >= 0 && v[1] <= 255 ? color256(v[1]) : undefined, 2];
    if (v[0] !== 2) return [undefined, 1];
    const rgb = colon && v.length >= 5 ? v.slice(2, 5) : v.slice(1, 4);
    if (rgb.length < 3) return [undefined, v.length];
    return [hex(...rgb.map((c) => Math.max(0, c))), colon ? v.length : 4];
  }

  // Cell attributes are shared immutable objects, interned so that equal attributes are the same object.
  const attrCache = new Map();
  function makeAttr(fg, bg, flags) {
    const key = `${fg}|${bg}|${flags}`;
    let a = attrCache.get(key);
    if (!a) {
      if (attrCache.size > 4096) {
        attrCache.clear();
        attrCache.set("null|null|0", DEFAULT_ATTR);
      }
      a = Object.freeze({ fg, bg, flags });
      attrCache.set(key, a);
    }
    return a;
  }
  const DEFAULT_ATTR = makeAttr(null, null, 0);

  // The bytes a key press sends, or null when the browser (or the input event) should have it.
  function keySequence(e, appCursor) {
    if (e.isComposing || e.keyCode === 229 || e.metaKey) return null;
    if (e.getModifierState && e.getModifierState("AltGraph")) return null;
    const k = e.key;
    const mod = 1 + (e.shiftKey ? 1 : 0) + (e.altKey ? 2 : 0) + (e.ctrlKey ? 4 : 0);
    if (has(CURSOR_KEYS, k)) {
      if (mod > 1) return `\x1b[1;${mod}${CURSOR_KEYS[k]}`;
      return (appCursor ? "\x1bO" : "\x1b[") + CURSOR_KEYS[k];
    }
    if (has(TILDE_KEYS, k)) return `\x1b[${TILDE_KEYS[k]}${mod > 1 ? ";" + mod : ""}~`;
    if (has(SS3_KEYS, k)) return mod > 1 ? `\x1b[1;${mod}${SS3_KEYS[k]}` : "\x1bO" + SS3_KEYS[k];
    const meta = e.altKey ? "\x1b" : "";
    if (k === "Enter") return meta + "\r";
    if (k === "Backspace") return meta + (e.ctrlKey ? "\x08" : "\x7f");
    if (k === "Tab") return e.shiftKey ? "\x1b[Z" : meta + "\t";
    if (k === "Escape") return meta + "\x1b";
    if (e.ctrlKey) {
      if (e.shiftKey && (e.code === "KeyC" || e.code === "KeyV")) return null;  // the browser's copy / paste
      let ch = k.length === 1 ? k.toLowerCase() : "";
      if (!(ch >= "a" && ch <= "z") && !has(CTRL_SYMBOLS, ch) && /^Key[A-Z]$/.test(e.code)) {
        ch = e.code[3].toLowerCase();  // a non-Latin layout: the key's position
      }
      if (ch >= "a" && ch <= "z") return meta + String.fromCharCode(ch.charCodeAt(0) - 96);
      if (has(CTRL_SYMBOLS, ch)) return meta + String.fromCharCode(CTRL_SYMBOLS[ch]);
      return null;
    }
    if (e.altKey && k.length === 1) return "\x1b" + k;
    return null;
  }

  function element(tag, className, parent) {
    const node = document.createElement(tag);
    node.className = className;
    if (parent) parent.appendChild(node);
    return node;
  }

  class DetTerminal {
    constructor(container, options = {}) {
      this.container = container;
      this.options = options;
      this.cols = Math.max(2, options.cols | 0 || 80);
      this.rows = Math.max(1, options.rows | 0 || 24);
      this.title = "";
      this.cell = null;  // {width, height} in px, once fit() has measured it
      this._maxScrollback = Math.max(0, options.scrollback ?? 1000);
      this._decoder = new TextDecoder("utf-8");
      this._raf = 0;
      this._stick = true;  // keep the view scrolled to the bottom
      this._composing = false;
      this._disposed = false;
      this._buildDom();
      this._reset();
      this._state = GROUND;
    }

    // ---- the public API ------------------------------------------------------------------------------------

    write(data) {
      if (this._disposed) return;
      const text = typeof data === "string" ? data : this._decoder.decode(data, { stream: true });
      this._parse(text);
      this._schedule();
    }

    resize(cols, rows) {
      cols = Math.max(2, cols | 0);
      rows = Math.max(1, rows | 0);
      if (cols === this.cols && rows === this.rows) return;
      for (const buf of [this._main, this._alt]) this._resizeBuffer(buf, cols, rows);
      this.cols = cols;
      this.rows = rows;
      this._x = Math.min(this._x, cols - 1);
      this._y = Math.min(this._y, rows - 1);
      this._wrapPending = false;
      this._top = 0;
      this._bottom = rows - 1;
      this._tabs = this._defaultTabs();
      this._schedule();
    }

    fit() {
      const cell = this._measure();
      if (!cell) return;  // not displayed
      const vp = this._viewport, style = getComputedStyle(vp);
      const width = vp.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
      const height = vp.clientHeight - parseFloat(style.paddingTop) - parseFloat(style.paddingBottom);
      const cols = Math.max(2, Math.floor(width / cell.width)), rows = Math.max(1, Math.floor(height / cell.height));
      const changed = cols !== this.cols || rows !== this.rows;
      this.resize(cols, rows);
      for (const row of this._screenEl.children) row._line = null;  // re-render every row
      this._schedule();
      if (changed && this.options.onResize) this.options.onResize(cols, rows);
    }

    focus() { this._input.focus({ preventScroll: true }); }

    dispose() {
      if (this._disposed) return;
      this._disposed = true;
      if (this._raf) cancelAnimationFrame(this._raf);
      for (const [name, handler] of this._listeners) this.container.removeEventListener(name, handler);
      this._viewport.remove();
      this._input.remove();
      this.container.classList.remove("det-terminal", "det-focused");
    }

    text() {
      return this._buf.lines.map((line) => line.chars.join("").replace(/ +$/, "")).join("\n");
    }

    cursor() { return { x: this._x, y: this._y }; }

    cellAttrs(x, y) {
      const line = this._buf.lines[y];
      if (!line || x < 0 || x >= this.cols) return null;
      const a = line.attrs[x];
      return { fg: a.fg, bg: a.bg, bold: !!(a.flags & BOLD), dim: !!(a.flags & DIM), italic: !!(a.flags & ITALIC),
        underline: !!(a.flags & UNDERLINE), inverse: !!(a.flags & INVERSE) };
    }

    // ---- the screen model ----------------------------------------------------------------------------------

    _reset() {
      this._attr = DEFAULT_ATTR;
      this._main = this._newBuffer();
      this._alt = this._newBuffer();
      this._buf = this._main;
      this._scrollback = [];
      this._sbReset = true;  // rebuild the scrollback's rows at the next render
      this._sbPushed = 0;  // lines pushed to the scrollback since the last render
      this._x = this._y = 0;
      this._wrapPending = false;
      [this._top, this._bottom] = [0, this.rows - 1];  // the scroll region
      this._modes = { appCursor: false, autowrap: true, cursorVisible: true, bracketedPaste: false, origin: false,
        insert: false };
      this._charsets = ["B", "B"];
      this._gl = 0;
      this._tabs = this._defaultTabs();
      this._lastChar = " ";
    }

    _newBuffer() {
      return { lines: Array.from({ length: this.rows }, () => this._blankLine(DEFAULT_ATTR)), saved: null };
    }

    _blankLine(attr, cols = this.cols) {
      return { chars: new Array(cols).fill(" "), attrs: new Array(cols).fill(attr), dirty: true };
    }

    _blankLines(n) {
      const erase = this._eraseAttr();
      return Array.from({ length: n }, () => this._blankLine(erase));
    }

    _eraseAttr() {
      return this._attr.bg === null ? DEFAULT_ATTR : makeAttr(null, this._attr.bg, 0);
    }

    _defaultTabs() {
      return Array.from({ length: this.cols }, (_, i) => i > 0 && i % 8 === 0);
    }

    _line() { return this._buf.lines[this._y]; }

    // Blanks cells [from, to) of a line.
    _fill(line, from, to) {
      const erase = this._eraseAttr();
      for (let i = Math.max(0, from); i < Math.min(to, line.chars.length); i++) {
        line.chars[i] = " ";
        line.attrs[i] = erase;
      }
      line.dirty = true;
    }

    _goto(x, y) {
      this._x = clamp(x, 0, this.cols - 1);
      this._y = clamp(y, 0, this.rows - 1);
      this._wrapPending = false;
    }

    // CUP, VPA: rows count from the scroll region's top in origin mode.
    _gotoOrigin(x, y) {
      if (this._modes.origin) y = Math.min(y + this._top, this._bottom);
      this._goto(x, y);
    }

    // CUU / CUD stop at the scroll region's margins when they start inside it.
    _up(n) { this._goto(this._x, Math.max(this._y >= this._top ? this._top : 0, this._y - n)); }
    _down(n) { this._goto(this._x, Math.min(this._y <= this._bottom ? this._bottom : this.rows - 1, this._y + n)); }

    _putChar(ch) {
      if (this._charsets[this._gl] === "0" && has(DEC_GRAPHICS, ch)) ch = DEC_GRAPHICS[ch];
      if (ch.charCodeAt(0) >= 0x300 && COMBINING.test(ch)) {
        const x = this._wrapPending ? this._x : this._x - 1, line = this._line();
        if (x >= 0) { line.chars[x] += ch; line.dirty = true; }
        return;
      }
      if (this._wrapPending) {
        this._x = 0;
        this._index();
      }
      if (this._modes.insert) this._insertChars(1);
      const line = this._line();
      line.chars[this._x] = ch;
      line.attrs[this._x] = this._attr;
      line.dirty = true;
      this._lastChar = ch;
      if (this._x < this.cols - 1) this._x++;
      else if (this._modes.autowrap) this._wrapPending = true;
    }

    // LF / IND: down a row, scrolling the region at its bottom.
    _index() {
      this._wrapPending = false;
      if (this._y === this._bottom) this._scrollUp(1, true);
      else if (this._y < this.rows - 1) this._y++;
    }

    // RI: up a row, scrolling the region down at its top.
    _reverseIndex() {
      this._wrapPending = false;
      if (this._y === this._top) this._scrollDown(1);
      else if (this._y > 0) this._y--;
    }

    _scrollUp(n, keep) {
      const lines = this._buf.lines, top = this._top, bottom = this._bottom;
      n = Math.min(n, bottom - top + 1);
      const gone = lines.splice(top, n);
      lines.splice(bottom - n + 1, 0, ...this._blankLines(n));
      if (keep && top === 0 && this._buf === this._main) gone.forEach((line) => this._pushScrollback(line));
    }

    _scrollDown(n) {
      const lines = this._buf.lines, top = this._top, bottom = this._bottom;
      n = Math.min(n, bottom - top + 1);
      lines.splice(bottom - n + 1, n);
      lines.splice(top, 0, ...this._blankLines(n));
    }

    _pushScrollback(line) {
      if (!this._maxScrollback) return;
      this._scrollback.push(line);
      if (this._scrollback.length > this._maxScrollback) this._scrollback.shift();
      this._sbPushed++;
    }

    // IL / DL: rows from the cursor's to the region's bottom move down / up (nothing outside the region).
    _insertLines(n, insert = true) {
      if (this._y < this._top || this._y > this._bottom) return;
      const lines = this._buf.lines, y = this._y, bottom = this._bottom;
      n = Math.min(n, bottom - y + 1);
      lines.splice(insert ? bottom - n + 1 : y, n);
      lines.splice(insert ? y : bottom - n + 1, 0, ...this._blankLines(n));
      this._goto(0, y);
    }

    // ICH / DCH: the rest of the row moves right / left.
    _insertChars(n, insert = true) {
      const { chars, attrs } = this._line(), x = this._x;
      n = Math.min(n, this.cols - x);
      const blanks = new Array(n).fill(" "), erase = new Array(n).fill(this._eraseAttr());
      if (insert) {
        chars.splice(x, 0, ...blanks);
        attrs.splice(x, 0, ...erase);
        chars.length = attrs.length = this.cols;
      } else {
        chars.splice(x, n);
        attrs.splice(x, n);
        chars.push(...blanks);
        attrs.push(...erase);
      }
      this._line().dirty = true;
    }

    _eraseInLine(mode) {
      const line = this._line();
      if (mode === 0) this._fill(line, this._x, this.cols);
      else if (mode === 1) this._fill(line, 0, this._x + 1);
      else if (mode === 2) this._fill(line, 0, this.cols);
      this._wrapPending = false;
    }

    _eraseInDisplay(mode) {
      const lines = this._buf.lines, erase = this._eraseAttr();
      if (mode === 3) [this._scrollback, this._sbReset] = [[], true];
      if (mode > 2) return;
      this._eraseInLine(mode);
      const [from, to] = mode === 0 ? [this._y + 1, this.rows] : mode === 1 ? [0, this._y] : [0, this.rows];
      for (let y = from; y < to; y++) {
        if (y !== this._y) lines[y] = this._blankLine(erase);
      }
    }

    _tab(n) {
      let x = this._x;
      for (; n > 0 && x < this.cols - 1; n--) {
        do x++; while (x < this.cols - 1 && !this._tabs[x]);
      }
      this._x = x;
    }

    _backTab(n) {
      let x = this._x;
      for (; n > 0 && x > 0; n--) {
        do x--; while (x > 0 && !this._tabs[x]);
      }
      this._goto(x, this._y);
    }

    _saveCursor() {
      this._buf.saved = { x: this._x, y: this._y, attr: this._attr, wrapPending: this._wrapPending,
        origin: this._modes.origin, charsets: this._charsets.slice(), gl: this._gl };
    }

    _restoreCursor() {
      const s = this._buf.saved || { x: 0, y: 0, attr: DEFAULT_ATTR, wrapPending: false, origin: false,
        charsets: ["B", "B"], gl: 0 };
      this._goto(s.x, s.y);
      this._wrapPending = s.wrapPending && this._x === this.cols - 1;
      [this._attr, this._modes.origin, this._charsets, this._gl] = [s.attr, s.origin, s.charsets.slice(), s.gl];
    }

    _useAlternate(on, saveCursor) {
      if (on === (this._buf === this._alt)) return;
      if (on) {
        if (saveCursor) this._saveCursor();
        this._alt = this._newBuffer();
        this._buf = this._alt;
      } else {
        this._buf = this._main;
        if (saveCursor) this._restoreCursor();
      }
    }

    _setRegion(top, bottom) {
      bottom = Math.min(bottom, this.rows);
      if (top >= bottom) return;
      this._top = top - 1;
      this._bottom = bottom - 1;
      this._gotoOrigin(0, 0);
    }

    _softReset() {  // DECSTR
      Object.assign(this._modes, { cursorVisible: true, origin: false, autowrap: true, insert: false,
        appCursor: false });
      [this._top, this._bottom, this._attr, this._charsets, this._gl] = [0, this.rows - 1, DEFAULT_ATTR, ["B", "B"], 0];
    }

    _resizeBuffer(buf, cols, rows) {
      const fitLine = (line) => {
        const n = line.chars.length;
        if (n > cols) { line.chars.length = cols; line.attrs.length = cols; }
        for (let i = n; i < cols; i++) { line.chars.push(" "); line.attrs.push(DEFAULT_ATTR); }
        line.dirty = true;
        return line;
      };
      const active = buf === this._buf, lines = buf.lines;
      let shift = 0;  // rows the content moved down (up when negative)
      lines.forEach(fitLine);
      const cursorY = active ? this._y : buf.saved ? buf.saved.y : 0;
      const blank = (line) => line.chars.every((c) => c === " ");
      while (lines.length > rows && lines.length - 1 > cursorY && blank(lines[lines.length - 1])) lines.pop();
      while (lines.length > rows) {
        const line = lines.shift();
        if (buf === this._main) this._pushScrollback(line);
        shift--;
      }
      while (lines.length < rows) {
        if (buf === this._main && this._scrollback.length) {
          lines.unshift(fitLine(this._scrollback.pop()));
          this._sbReset = true;
          shift++;
        } else {
          lines.push(this._blankLine(DEFAULT_ATTR, cols));
        }
      }
      if (active) this._y = clamp(this._y + shift, 0, rows - 1);
      const saved = buf.saved;
      if (saved) [saved.x, saved.y] = [Math.min(saved.x, cols - 1), clamp(saved.y + shift, 0, rows - 1)];
    }

    // ---- the parser ----------------------------------------------------------------------------------------

    _parse(s) {
      let i = 0;
      while (i < s.length) {
        const c = s.charCodeAt(i);
        if (this._state === GROUND && c >= 0x20 && c !== 0x7f && !(c >= 0x80 && c < 0xa0)) {
          i = this._printRun(s, i);
          continue;
        }
        switch (this._state) {
          case GROUND: if (c >= 0x80) this._escDispatch(String.fromCharCode(c - 0x40)); else this._control(c); break;
          case ESC: if (c < 0x20) this._control(c); else this._escDispatch(s[i]); break;
          case ESC_INTER: this._escInter(c, s[i]); break;
          case CSI: this._csiByte(c, s[i]); break;
          case OSC: this._oscByte(c, s[i]); break;
          case STRING: this._stringByte(c); break;
        }
        i++;
      }
    }

    _printRun(s, i) {
      while (i < s.length) {
        const c = s.charCodeAt(i);
        if (c < 0x20 || (c >= 0x7f && c < 0xa0)) break;
        let ch = s[i++];
        if (c >= 0xd800 && c <= 0xdbff && i < s.length) ch += s[i++];  // a surrogate pair is one character
        this._putChar(ch);
      }
      return i;
    }

    _control(c) {
      switch (c) {
        case 0x08: this._x = Math.max(0, this._x - 1); this._wrapPending = false; break;
        case 0x09: this._tab(1); break;
        case 0x0a: case 0x0b: case 0x0c: this._index(); break;
        case 0x0d: this._x = 0; this._wrapPending = false; break;
        case 0x0e: this._gl = 1; break;
        case 0x0f: this._gl = 0; break;
        case 0x18: case 0x1a: this._state = GROUND; break;
        case 0x1b: this._state = ESC; break;
        default: break;  // BEL, NUL and the rest: ignored
      }
    }

    _escDispatch(ch) {
      this._state = GROUND;
      switch (ch) {
        case "[": this._state = CSI; this._params = [this._group = [-1]]; this._prefix = ""; this._inter = "";
          this._ignore = false; break;
        case "]": this._state = OSC; this._osc = ""; break;
        case "P": case "X": case "^": case "_": this._state = STRING; break;
        case "7": this._saveCursor(); break;
        case "8": this._restoreCursor(); break;
        case "D": this._index(); break;
        case "E": this._x = 0; this._index(); break;
        case "M": this._reverseIndex(); break;
        case "H": this._tabs[this._x] = true; break;
        case "c": this._reset(); break;
        default:
          if (ch >= " " && ch <= "/") { this._state = ESC_INTER; this._inter = ch; }  // ESC ( B, ESC # 8, ESC % G...
          break;  // ESC = / ESC > (keypad modes), ESC \ (ST) and the rest: ignored
      }
    }

    _escInter(c, ch) {
      if (c < 0x20) this._control(c);
      else if (c < 0x30) this._inter += ch;
      else {
        this._state = GROUND;
        if (this._inter === "(") this._charsets[0] = ch;
        else if (this._inter === ")") this._charsets[1] = ch;
      }
    }

    _csiByte(c, ch) {
      const g = this._group;
      if (c >= 0x30 && c <= 0x39) g[g.length - 1] = Math.min(99999, Math.max(0, g[g.length - 1]) * 10 + c - 0x30);
      else if (c === 0x3b) this._params.push(this._group = [-1]);
      else if (c === 0x3a) g.push(-1);
      else if (c >= 0x3c && c <= 0x3f) {
        if (this._params.length === 1 && g.length === 1 && g[0] < 0 && !this._prefix) this._prefix = ch;
        else this._ignore = true;
      } else if (c >= 0x20 && c <= 0x2f) this._inter += ch;
      else if (c >= 0x40 && c <= 0x7e) {
        this._state = GROUND;
        if (!this._ignore) this._csiDispatch(ch);
      } else if (c < 0x20) this._control(c);
      else if (c !== 0x7f) this._ignore = true;
    }

    // Parameter i, or `def` when it is missing or empty; _n: a count (0 or missing means 1).
    _p(i, def) {
      const g = this._params[i];
      return g && g[0] >= 0 ? g[0] : def;
    }
    _n(i) { return Math.max(1, this._p(i, 1)); }

    _csiDispatch(f) {
      if (this._prefix === "?" && !this._inter) {
        if (f === "h" || f === "l") this._decMode(f === "h");
        return;
      }
      if (this._prefix) return;  // CSI > c, CSI > q, CSI = c...: not answered
      if (this._inter) {
        if (this._inter === "!" && f === "p") this._softReset();
        return;  // CSI SP q (cursor style), CSI $ p (DECRQM)...: ignored
      }
      const n = this._n(0), x = this._x, y = this._y;
      switch (f) {
        case "A": this._up(n); break;
        case "B": case "e": this._down(n); break;
        case "C": case "a": this._goto(x + n, y); break;
        case "D": this._goto(x - n, y); break;
        case "E": this._down(n); this._x = 0; break;
        case "F": this._up(n); this._x = 0; break;
        case "G": case "`": this._goto(n - 1, y); break;
        case "H": case "f": this._gotoOrigin(this._n(1) - 1, n - 1); break;
        case "d": this._gotoOrigin(x, n - 1); break;
        case "J": this._eraseInDisplay(this._p(0, 0)); break;
        case "K": this._eraseInLine(this._p(0, 0)); break;
        case "L": this._insertLines(n); break;
        case "M": this._insertLines(n, false); break;
        case "P": this._insertChars(n, false); break;
        case "@": this._insertChars(n); break;
        case "X": this._fill(this._line(), x, x + n); break;
        case "S": this._scrollUp(n, false); break;
        case "T": if (this._params.length === 1) this._scrollDown(n); break;  // with more: mouse tracking
        case "b": for (let i = 0; i < Math.min(n, 65535); i++) this._putChar(this._lastChar); break;
        case "I": this._tab(n); break;
        case "Z": this._backTab(n); break;
        case "g": if (this._p(0, 0) === 3) this._tabs.fill(false); else if (this._p(0, 0) === 0) this._tabs[x] = false;
          break;
        case "m": this._sgr(); break;
        case "r": this._setRegion(this._n(0), this._p(1, this.rows) || this.rows); break;
        case "s": this._saveCursor(); break;
        case "u": this._restoreCursor(); break;
        case "n": this._deviceStatus(this._p(0, 0)); break;
        case "c": if (this._p(0, 0) === 0) this._reply("\x1b[?1;2c"); break;
        case "h": case "l": if (this._p(0, 0) === 4) this._modes.insert = f === "h"; break;
        default: break;  // CSI t (window ops) and the rest: ignored
      }
    }

    _deviceStatus(what) {
      if (what === 5) this._reply("\x1b[0n");
      else if (what === 6) {
        const row = this._y - (this._modes.origin ? this._top : 0) + 1;
        this._reply(`\x1b[${row};${this._x + 1}R`);
      }
    }

    _decMode(on) {
      for (const g of this._params) {
        switch (g[0]) {
          case 1: this._modes.appCursor = on; break;
          case 6: this._modes.origin = on; this._gotoOrigin(0, 0); break;
          case 7: this._modes.autowrap = on; if (!on) this._wrapPending = false; break;
          case 25: this._modes.cursorVisible = on; break;
          case 47: case 1047: this._useAlternate(on, false); break;
          case 1049: this._useAlternate(on, true); break;
          case 2004: this._modes.bracketedPaste = on; break;
          default: break;  // mouse modes, focus events and the rest: ignored
        }
      }
    }

    _sgr() {
      let { fg, bg, flags } = this._attr;
      const ps = this._params;
      for (let i = 0; i < ps.length; i++) {
        const g = ps[i], p = Math.max(0, g[0]);
        if (p === 0) { fg = bg = null; flags = 0; }
        else if (p === 4 && g.length > 1) flags = g[1] > 0 ? flags | UNDERLINE : flags & ~UNDERLINE;
        else if (has(SGR_SET, p)) flags |= SGR_SET[p];
        else if (has(SGR_RESET, p)) flags &= ~SGR_RESET[p];
        else if (p >= 30 && p <= 37) fg = PALETTE[p - 30];
        else if (p >= 90 && p <= 97) fg = PALETTE[p - 82];
        else if (p >= 40 && p <= 47) bg = PALETTE[p - 40];
        else if (p >= 100 && p <= 107) bg = PALETTE[p - 92];
        else if (p === 39) fg = null;
        else if (p === 49) bg = null;
        else if (p === 38 || p === 48 || p === 58) {
          const colon = g.length > 1;
          const args = colon ? g.slice(1) : ps.slice(i + 1, i + 5).map((x) => x[0]);
          const [color, used] = extendedColor(args, colon);
          if (!colon) i += used;
          if (color !== undefined && p === 38) fg = color;
          if (color !== undefined && p === 48) bg = color;
        }
      }
      this._attr = makeAttr(fg, bg, flags);
    }

    _oscByte(c, ch) {
      if (c === 0x07 || c === 0x9c || c === 0x1b) {
        const m = /^(\d*);([^]*)$/.exec(this._osc);
        if (m && (m[1] === "0" || m[1] === "2")) this.title = m[2];
        this._state = c === 0x1b ? ESC : GROUND;  // ESC \ : the "\" is then an ignored ESC sequence
      } else if (c === 0x18 || c === 0x1a) this._state = GROUND;
      else if (this._osc.length < MAX_OSC) this._osc += ch;
    }

    _stringByte(c) {
      if (c === 0x1b) this._state = ESC;
      else if (c === 0x9c || c === 0x18 || c === 0x1a) this._state = GROUND;
    }

    _reply(text) { if (this.options.onData) this.options.onData(text); }

    // ---- rendering -----------------------------------------------------------------------------------------

    _buildDom() {
      const c = this.container;
      c.classList.add("det-terminal");
      this._viewport = element("div", "det-term-viewport", c);
      this._sbEl = element("div", "det-term-scrollback", this._viewport);
      this._screenEl = element("div", "det-term-screen", this._viewport);
      this._measureEl = element("div", "det-term-row det-term-measure", this._viewport);
      element("span", "", this._measureEl).textContent = "W".repeat(32);
      this._input = element("textarea", "det-term-input", c);
      for (const [name, value] of [["autocapitalize", "off"], ["autocomplete", "off"], ["autocorrect", "off"],
        ["spellcheck", "false"], ["aria-label", "Terminal input"]]) this._input.setAttribute(name, value);
      this._viewport.tabIndex = -1;  // a click that selects text focuses it, and keys still reach the container
      this._listeners = [["click", () => { if (!this._selection()) this.focus(); }],
        ["keydown", (e) => this._onKeyDown(e)], ["paste", (e) => this._onPaste(e)]];
      for (const [name, handler] of this._listeners) c.addEventListener(name, handler);
      this._viewport.addEventListener("scroll", () => {
        const vp = this._viewport;
        this._stick = vp.scrollTop + vp.clientHeight >= vp.scrollHeight - 4;
      });
      const input = this._input;
      input.addEventListener("input", (e) => this._onInput(e));
      input.addEventListener("compositionstart", () => { this._composing = true; });
      input.addEventListener("compositionend", () => { this._composing = false; this._flushInput(); });
      input.addEventListener("focus", () => { c.classList.add("det-focused"); this._schedule(); });
      input.addEventListener("blur", () => { c.classList.remove("det-focused"); this._schedule(); });
    }

    _measure() {
      const width = this._measureEl.firstChild.getBoundingClientRect().width / 32;
      const height = this._measureEl.getBoundingClientRect().height;
      if (!width || !height) return null;
      this.cell = { width, height };
      return this.cell;
    }

    _schedule() {
      if (!this._raf && !this._disposed) this._raf = requestAnimationFrame(() => this._render());
    }

    _render() {
      this._raf = 0;
      if (this._disposed) return;
      this._renderScrollback();
      const rows = this._screenEl.children, lines = this._buf.lines;
      while (rows.length < this.rows) element("div", "det-term-row", this._screenEl);
      while (rows.length > this.rows) this._screenEl.lastChild.remove();
      const cursorY = this._modes.cursorVisible ? this._y : -1;
      for (let y = 0; y < this.rows; y++) {
        const row = rows[y], line = lines[y], cursorX = y === cursorY ? this._x : -1;
        if (row._line === line && !line.dirty && row._cursorX === cursorX) continue;
        this._renderRow(row, line, cursorX);
        row._line = line;
        row._cursorX = cursorX;
        line.dirty = false;
      }
      if (this._stick) this._viewport.scrollTop = this._viewport.scrollHeight;
      this._placeInput();
    }

    _renderScrollback() {
      const sb = this._scrollback, el = this._sbEl;
      el.style.display = this._buf === this._alt ? "none" : "";
      if (this._sbReset) {
        el.textContent = "";
        sb.forEach((line) => this._renderRow(element("div", "det-term-row", el), line, -1));
      } else if (this._sbPushed) {
        for (const line of sb.slice(Math.max(0, sb.length - this._sbPushed))) {
          this._renderRow(element("div", "det-term-row", el), line, -1);
        }
        while (el.children.length > sb.length) el.firstChild.remove();
      }
      this._sbReset = false;
      this._sbPushed = 0;
    }

    // One row: a span per run of equal attributes, the cursor's cell a span of its own.
    _renderRow(row, line, cursorX) {
      const { chars, attrs } = line;
      let end = chars.length;
      while (end > 0 && chars[end - 1] === " " && attrs[end - 1].bg === null && !(attrs[end - 1].flags & (INVERSE |
        UNDERLINE | STRIKE))) end--;
      if (cursorX >= 0) end = Math.max(end, cursorX + 1);
      const frag = document.createDocumentFragment();
      for (let start = 0; start < end;) {
        let stop = start + 1;
        if (start !== cursorX) while (stop < end && stop !== cursorX && attrs[stop] === attrs[start]) stop++;
        const span = this._span(chars.slice(start, stop).join(""), attrs[start], start === cursorX);
        if (start === cursorX) span.className = "det-term-cursor";
        frag.appendChild(span);
        start = stop;
      }
      row.replaceChildren(frag);
    }

    _span(text, a, cursor) {
      const span = document.createElement("span");
      span.textContent = text;
      if (a === DEFAULT_ATTR) return span;
      let fg = a.fg, bg = a.bg;
      if (a.flags & INVERSE) [fg, bg] = [bg || DEFAULT_BG, fg || DEFAULT_FG];
      if (a.flags & HIDDEN) fg = bg || DEFAULT_BG;
      const st = span.style;
      if (fg && !cursor) st.color = fg;
      if (bg && !cursor) st.backgroundColor = bg;
      if (a.flags & BOLD) st.fontWeight = "bold";
      if (a.flags & DIM) st.opacity = "0.7";
      if (a.flags & ITALIC) st.fontStyle = "italic";
      const deco = [a.flags & UNDERLINE ? "underline" : "", a.flags & STRIKE ? "line-through" : ""].join(" ").trim();
      if (deco) st.textDecoration = deco;
      return span;
    }

    // The textarea follows the cursor, so that an IME's window and a phone's scrolling go there.
    _placeInput() {
      const cell = document.activeElement === this._input && (this.cell || this._measure());
      if (!cell) return;
      const vp = this._viewport, top = this._screenEl.offsetTop - vp.scrollTop + this._y * cell.height;
      this._input.style.top = `${clamp(top, 0, Math.max(0, this.container.clientHeight - cell.height))}px`;
      this._input.style.left = `${clamp(this._x * cell.width, 0, Math.max(0, this.container.clientWidth - 2))}px`;
    }

    // ---- input ---------------------------------------------------------------------------------------------

    // Sends what the user typed or pasted: the view goes back to the bottom, a selection in the terminal goes.
    _send(text) {
      if (!text) return;
      if (this._selection()) window.getSelection().removeAllRanges();
      this._stick = true;
      this._schedule();
      if (this.options.onData) this.options.onData(text);
    }

    // The text selected in the terminal, if any.
    _selection() {
      const sel = window.getSelection();
      return sel && !sel.isCollapsed && this.container.contains(sel.anchorNode) ? sel.toString() : "";
    }

    _onKeyDown(e) {
      if (e.ctrlKey && !e.altKey && e.code === "KeyC" && this._selection()) {
        document.execCommand("copy");  // Ctrl+C or Ctrl+Shift+C with text selected: copy it
        e.preventDefault();
        return;
      }
      const seq = keySequence(e, this._modes.appCursor);
      if (seq === null) {
        // A key typed while the viewport has the focus (after selecting text) goes on to the textarea.
        if (e.target !== this._input && e.key.length === 1 && !e.ctrlKey && !e.metaKey) this.focus();
        return;
      }
      e.preventDefault();
      e.stopPropagation();
      this._send(seq);
    }

    _onInput(e) {
      if (this._composing || e.isComposing) return;
      this._flushInput();
    }

    _flushInput() {
      const text = this._input.value;
      this._input.value = "";
      this._send(text.replace(/\r?\n/g, "\r"));
    }

    _onPaste(e) {
      e.preventDefault();
      const data = e.clipboardData ? e.clipboardData.getData("text/plain") : "";
      if (!data) return;
      const text = data.replace(/\r?\n/g, "\r");
      if (this._modes.bracketedPaste) this._send("\x1b[200~" + text.replace(/\x1b\[20[01]~/g, "") + "\x1b[201~");
      else this._send(text);
    }
  }

  window.DetTerminal = DetTerminal;
})();
