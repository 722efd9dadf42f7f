"""DetTerminal (determined/master/ui/static/terminal.js), the web UI's terminal emulator, in headless Chromium on a
blank page: what escape sequences do to the screen (text, cursor, cell attributes), the scrollback, the alternate
screen, the replies and the keys it sends through onData, pastes, the DOM it renders and fit() at a phone's width."""
import pathlib
from typing import Any, Dict, Iterator, List

import pytest

STATIC = pathlib.Path(__file__).resolve().parents[2] / "determined" / "master" / "ui" / "static"
PAGE = '<div id="t" style="width:800px;height:400px"></div>'
RED, BLUE, BRIGHT_GREEN, BRIGHT_YELLOW = "#cd3131", "#2472c8", "#23d18b", "#f5f543"

# (Re)creates `term` on #t; what it sends goes to `sent`, its onResize calls to `resizes`.
START = """(opts) => {
  if (window.term) window.term.dispose();
  window.sent = [];
  window.resizes = [];
  window.term = new DetTerminal(document.getElementById('t'), Object.assign({
    onData: (d) => window.sent.push(d), onResize: (c, r) => window.resizes.push([c, r])}, opts || {}));
}"""
FRAME = "() => new Promise((resolve) => requestAnimationFrame(() => resolve()))"
SCREEN_ROWS = ("() => Array.from(document.querySelectorAll('.det-term-screen > .det-term-row'))"
               ".map((r) => r.textContent)")
SCROLLBACK_ROWS = ("() => Array.from(document.querySelectorAll('.det-term-scrollback > .det-term-row'))"
                   ".map((r) => r.textContent)")


@pytest.fixture(scope="module")
def context(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1000, "height": 700})
    try:
        yield context
    finally:
        context.close()


@pytest.fixture
def page(context: Any) -> Iterator[Any]:
    """A blank page with terminal.css and terminal.js and an 80x24 `term`; no page error may happen."""
    page = context.new_page()
    errors: List[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        load(page, PAGE)
        yield page
        assert errors == []
    finally:
        page.close()


def load(page: Any, html: str) -> None:
    page.set_content(html)
    page.add_style_tag(path=str(STATIC / "terminal.css"))
    page.add_script_tag(path=str(STATIC / "terminal.js"))
    page.evaluate(START)


def write(page: Any, *chunks: str) -> None:
    page.evaluate("(chunks) => chunks.forEach((c) => term.write(c))", list(chunks))


def write_bytes(page: Any, *chunks: bytes) -> None:
    page.evaluate("(chunks) => chunks.forEach((c) => term.write(new Uint8Array(c)))", [list(c) for c in chunks])


def lines(page: Any) -> List[str]:
    return page.evaluate("() => term.text()").split("\n")


def cursor(page: Any) -> Dict[str, int]:
    return page.evaluate("() => term.cursor()")


def attrs(page: Any, x: int, y: int) -> Dict[str, Any]:
    return page.evaluate("([x, y]) => term.cellAttrs(x, y)", [x, y])


def resize(page: Any, cols: int, rows: int) -> None:
    page.evaluate("([c, r]) => term.resize(c, r)", [cols, rows])


def fill(page: Any, rows: int) -> None:
    """Clears the screen and writes `row0`, `row1`... on its rows, the cursor left home."""
    write(page, "\x1b[H\x1b[2J" + "\r\n".join(f"row{i}" for i in range(rows)) + "\x1b[H")


def sent(page: Any) -> List[str]:
    return page.evaluate("() => window.sent.splice(0)")


def test_plain_text_and_crlf(page: Any) -> None:
    write(page, "hello\r\nworld")
    assert lines(page)[:3] == ["hello", "world", ""]
    assert cursor(page) == {"x": 5, "y": 1}
    write(page, "\n!")  # a bare LF keeps the column
    assert lines(page)[2] == "     !"
    write(page, "\rab\tc\x08d\x07")  # CR, a tab to column 8, BS, BEL (ignored)
    assert lines(page)[2] == "ab   !  d"
    assert cursor(page) == {"x": 9, "y": 2}
    assert page.evaluate("() => [term.cols, term.rows]") == [80, 24]
    assert len(lines(page)) == 24


def test_wrap_at_last_column(page: Any) -> None:
    resize(page, 10, 4)
    write(page, "0123456789")
    assert cursor(page) == {"x": 9, "y": 0}  # the wrap is pending
    assert lines(page)[:2] == ["0123456789", ""]
    write(page, "AB")
    assert lines(page)[:2] == ["0123456789", "AB"]
    assert cursor(page) == {"x": 2, "y": 1}
    write(page, "\r\nabcdefghij\r\nk")  # CR LF after a full row: no blank row
    assert lines(page)[2:] == ["abcdefghij", "k"]
    write(page, "\x1b[H\x1b[2J\x1b[?7l0123456789XY")  # no auto-wrap: the last column is overwritten
    assert lines(page)[:2] == ["012345678Y", ""]
    assert cursor(page) == {"x": 9, "y": 0}
    write(page, "\x1b[?7h\x1b[3;1Hmid\x1b[4;1H" + "x" * 25)  # wrapping on the last row scrolls
    assert lines(page) == ["mid", "x" * 10, "x" * 10, "x" * 5]


def test_utf8_and_escape_sequences_split_across_writes(page: Any) -> None:
    euro = "€".encode()
    write_bytes(page, b"\xc3", b"\xa9" + euro[:1], euro[1:2], euro[2:] + b"\x1b", b"[3", b"1mR\x1b]0;ti", b"tle\x07",
                b"\x1b[", b"0mS")
    assert lines(page)[0] == "é€RS"
    assert attrs(page, 2, 0)["fg"] == RED
    assert attrs(page, 3, 0)["fg"] is None
    assert page.evaluate("() => term.title") == "title"
    write(page, "\x1b", "[2;", "3H", "\x1b]2;a", "b\x1b", "\\Z")  # strings split the same way
    assert lines(page)[1] == "  Z"
    assert page.evaluate("() => term.title") == "ab"


def test_sgr_colors(page: Any) -> None:
    write(page, "\x1b[31mA\x1b[92mB\x1b[44mC\x1b[0mD\x1b[38;5;196mE\x1b[48;5;244mF\x1b[m"
                "\x1b[38;2;255;0;128;48;2;1;2;3mG\x1b[0;1;4;7mH\x1b[22;24;27mI\x1b[39;49mJ"
                "\x1b[38:2::10:20:30mK\x1b[38;5;21mL\x1b[39;103mM\x1b[3;2mN\x1b[23;22mO")
    got = [attrs(page, x, 0) for x in range(15)]
    colors = [(a["fg"], a["bg"]) for a in got]
    assert colors == [
        (RED, None), (BRIGHT_GREEN, None), (BRIGHT_GREEN, BLUE), (None, None),  # A-D
        ("#ff0000", None), ("#ff0000", "#808080"), ("#ff0080", "#010203"),  # E-G: 256 colors and truecolor
        (None, None), (None, None), (None, None), ("#0a141e", None), ("#0000ff", None),  # H-L
        (None, BRIGHT_YELLOW), (None, BRIGHT_YELLOW), (None, BRIGHT_YELLOW)]  # M-O
    flags = [(a["bold"], a["underline"], a["inverse"]) for a in got]
    assert flags[6] == (False, False, False)
    assert flags[7] == (True, True, True)  # H: reset then bold, underline, inverse
    assert flags[8] == (False, False, False)  # I: 22, 24, 27
    assert (got[13]["italic"], got[13]["dim"], got[14]["italic"], got[14]["dim"]) == (True, True, False, False)


def test_cursor_movement(page: Any) -> None:
    moves = [("\x1b[5;10H", 9, 4), ("\x1b[2A", 9, 2), ("\x1b[3B", 9, 5), ("\x1b[4C", 13, 5), ("\x1b[20D", 0, 5),
             ("\x1b[100;200H", 79, 23), ("\x1b[H", 0, 0), ("\x1b[7G", 6, 0), ("\x1b[3d", 6, 2), ("\x1b[12`", 11, 2),
             ("\x1b[2E", 0, 4), ("\x1b[5C\x1b[F", 0, 3), ("\x1b[;5H", 4, 0), ("\x1b[0B", 4, 1), ("\x1b[3;3f", 2, 2),
             ("\x1b[5A", 2, 0), ("\x1b[99B", 2, 23), ("\x1bD", 2, 23), ("\x1b[H\x1bE", 0, 1), ("\t\t", 16, 1),
             ("\x1b[Z", 8, 1), ("\x1b[2I", 24, 1)]
    for seq, x, y in moves:
        write(page, seq)
        assert cursor(page) == {"x": x, "y": y}, repr(seq)
    write(page, "\x1b[4;5H\x1b7\x1b[31m\x1b[H\x1b8X")  # ESC 7 / 8 restore the position and the attributes
    assert lines(page)[3] == "    X"
    assert attrs(page, 4, 3)["fg"] is None
    write(page, "\x1b[32m\x1b[10;10H\x1b[s\x1b[0m\x1b[1;1H\x1b[uY")
    assert lines(page)[9] == "         Y"
    assert attrs(page, 9, 9)["fg"] == "#0dbc79"


def test_erase_in_display_and_line(page: Any) -> None:
    resize(page, 10, 4)
    full = "\x1b[0m\x1b[H" + "\r\n".join(["0123456789"] * 4)
    write(page, full, "\x1b[2;5H\x1b[K", "\x1b[3;5H\x1b[1K", "\x1b[4;3H\x1b[2K")
    assert lines(page) == ["0123456789", "0123", "     56789", ""]
    assert cursor(page) == {"x": 2, "y": 3}
    write(page, full, "\x1b[2;5H\x1b[J")
    assert lines(page) == ["0123456789", "0123", "", ""]
    write(page, full, "\x1b[3;5H\x1b[1J")
    assert lines(page) == ["", "", "     56789", "0123456789"]
    write(page, full, "\x1b[2;2H\x1b[2J")
    assert lines(page) == ["", "", "", ""]
    assert cursor(page) == {"x": 1, "y": 1}
    write(page, full, "\x1b[5J\x1b[9K")  # unknown modes: nothing
    assert lines(page) == ["0123456789"] * 4
    write(page, full, "\x1b[1;3H\x1b[4X")
    assert lines(page)[0] == "01    6789"
    assert cursor(page) == {"x": 2, "y": 0}
    write(page, "\x1b[44m\x1b[2;4H\x1b[K\x1b[4;1H\x1b[2X")  # erases take the current background
    assert [attrs(page, x, 1)["bg"] for x in (2, 3, 9)] == [None, BLUE, BLUE]
    assert [attrs(page, x, 3)["bg"] for x in (0, 1, 2)] == [BLUE, BLUE, None]
    write(page, "\x1b[2J")
    assert attrs(page, 5, 2)["bg"] == BLUE and attrs(page, 5, 2)["fg"] is None


def test_insert_and_delete_characters_and_lines(page: Any) -> None:
    resize(page, 10, 6)
    write(page, "\x1b[H" + "\r\n".join(f"{i}abcdefgh" for i in range(6)))
    write(page, "\x1b[1;3H\x1b[2@", "\x1b[2;2H\x1b[3P", "\x1b[3;9H\x1b[5P", "\x1b[4;1H\x1b[99@")
    assert lines(page)[:4] == ["0a  bcdefg", "1defgh", "2abcdefg", ""]
    fill(page, 6)
    write(page, "\x1b[3;4H\x1b[L")  # IL outside a region: the rows below move down, the last one goes
    assert lines(page) == ["row0", "row1", "", "row2", "row3", "row4"]
    assert cursor(page) == {"x": 0, "y": 2}
    write(page, "\x1b[M\x1b[1;1H\x1b[2M")
    assert lines(page) == ["row2", "row3", "row4", "", "", ""]
    fill(page, 6)
    write(page, "\x1b[2;5r")  # a region on rows 1-4: IL/DL above or below it do nothing
    write(page, "\x1b[1;1H\x1b[L\x1b[6;1H\x1b[M")
    assert lines(page) == [f"row{i}" for i in range(6)]
    write(page, "\x1b[3;1H\x1b[2L")  # inside: rows move within the region only
    assert lines(page) == ["row0", "row1", "", "", "row2", "row5"]
    write(page, "\x1b[2;1H\x1b[M")
    assert lines(page) == ["row0", "", "", "row2", "", "row5"]
    write(page, "\x1b[6;1H\x1b[2@X\x1b[4;2H\x1b[P")  # ICH/DCH ignore the region
    assert lines(page)[3:] == ["rw2", "", "X row5"]


def test_scroll_region_and_reverse_index(page: Any) -> None:
    resize(page, 10, 6)
    fill(page, 6)
    write(page, "\x1b[2;4r")
    assert cursor(page) == {"x": 0, "y": 0}  # DECSTBM homes the cursor
    write(page, "\x1b[4;1H\nA")  # LF at the region's bottom scrolls only the region
    assert lines(page) == ["row0", "row2", "row3", "A", "row4", "row5"]
    write(page, "\x1b[2;1H\x1bMB")  # RI at the region's top scrolls it down
    assert lines(page) == ["row0", "B", "row2", "row3", "row4", "row5"]
    write(page, "\x1b[6;1H\n\nX")  # below the region LF stops at the last row without scrolling
    assert lines(page) == ["row0", "B", "row2", "row3", "row4", "Xow5"]
    write(page, "\x1b[1;1H\x1bM")  # RI above the region: nothing to scroll at the top row
    assert lines(page)[0] == "row0" and cursor(page) == {"x": 0, "y": 0}
    write(page, "\x1b[S")  # SU / SD scroll the region
    assert lines(page) == ["row0", "row2", "row3", "", "row4", "Xow5"]
    write(page, "\x1b[2T")
    assert lines(page) == ["row0", "", "", "row2", "row4", "Xow5"]
    write(page, "\x1b[r\x1b[6;1H\nY")  # the whole screen again
    assert lines(page) == ["", "", "row2", "row4", "Xow5", "Y"]


def test_alternate_screen_1049(page: Any) -> None:
    write(page, "main1\r\nmain2\x1b[31m\x1b[2;3H")
    write(page, "\x1b[?1049h")
    assert lines(page) == [""] * 24
    write(page, "\x1b[0m\x1b[Halt\r\n" + "\n" * 40)  # no scrollback for the alternate screen
    assert "alt" not in page.evaluate("() => term.text()")
    write(page, "\x1b[Hagain")
    write(page, "\x1b[?1049l")
    assert lines(page)[:3] == ["main1", "main2", ""]
    assert cursor(page) == {"x": 2, "y": 1}
    write(page, "X")
    assert attrs(page, 2, 1)["fg"] == RED  # the attributes saved with the cursor
    write(page, "\x1b[?1049h")
    assert lines(page)[0] == ""  # cleared on entry
    write(page, "\x1b[?1049l\x1b[?47h")
    assert lines(page)[0] == ""
    write(page, "\x1b[?47l")
    assert lines(page)[1] == "maXn2"
    page.evaluate(FRAME)
    assert page.evaluate(SCROLLBACK_ROWS) == []


def test_scrollback(page: Any) -> None:
    page.evaluate(START, {"scrollback": 5})
    resize(page, 10, 3)
    write(page, "\r\n".join(f"l{i}" for i in range(1, 13)))
    assert lines(page) == ["l10", "l11", "l12"]
    page.evaluate(FRAME)
    assert page.evaluate(SCROLLBACK_ROWS) == ["l5", "l6", "l7", "l8", "l9"]
    assert page.evaluate(SCREEN_ROWS) == ["l10", "l11", "l12 "]  # the cursor's cell
    write(page, "\x1b[2;3r\x1b[3;1H\n\n\x1b[r")  # a region below the top row keeps nothing
    write(page, "\x1b[?1049h\x1b[3;1H\n\n\n")  # nor does the alternate screen
    page.evaluate(FRAME)
    assert page.evaluate("() => getComputedStyle(document.querySelector('.det-term-scrollback')).display") == "none"
    write(page, "\x1b[?1049l\x1b[3;1H\nx")
    page.evaluate(FRAME)
    assert page.evaluate(SCROLLBACK_ROWS) == ["l6", "l7", "l8", "l9", "l10"]
    write(page, "\x1b[3J")
    page.evaluate(FRAME)
    assert page.evaluate(SCROLLBACK_ROWS) == []

    # The view follows the output, unless the user scrolled up; typing scrolls back down.
    page.evaluate(START)
    write(page, "\r\n".join(f"line {i}" for i in range(100)))
    page.evaluate(FRAME)
    at_bottom = """() => { const v = document.querySelector('.det-term-viewport');
      return v.scrollHeight > v.clientHeight && v.scrollTop + v.clientHeight >= v.scrollHeight - 1; }"""
    assert page.evaluate(at_bottom)
    assert page.evaluate(SCROLLBACK_ROWS)[:2] == ["line 0", "line 1"]
    page.evaluate("() => { document.querySelector('.det-term-viewport').scrollTop = 0; }")
    page.evaluate(FRAME)
    page.evaluate(FRAME)
    write(page, "\r\nmore\r\nmore")
    page.evaluate(FRAME)
    assert page.evaluate("() => document.querySelector('.det-term-viewport').scrollTop") == 0
    page.evaluate("() => term.focus()")
    page.keyboard.press("Enter")
    page.evaluate(FRAME)
    assert page.evaluate(at_bottom)


def test_replies_and_consumed_sequences(page: Any) -> None:
    write(page, "\x1b[5;10H\x1b[6n", "\x1b[5n", "\x1b[c", "\x1b[>c\x1b[>0q")
    assert sent(page) == ["\x1b[5;10R", "\x1b[0n", "\x1b[?1;2c"]
    write(page, "\x1b[3;20r\x1b[?6h\x1b[2;4H\x1b[6n\x1b[?6l\x1b[r")  # origin mode: relative to the region
    assert sent(page) == ["\x1b[2;4R"]
    write(page, "\x1b[H\x1b[2J\x1b[?1;2$p\x1b[>4;2m\x1b[22;0;0t\x1bP+q544e\x1b\\\x1b]8;;http://x/\x07link"
                "\x1b]8;;\x1b\\ \x1b_apc\x1b\\\x1b^pm\x1b\\\x1bXsos\x1b\\\x1b[?1000h\x1b[?1006;1004h\x1b[2 q\x1b=\x1b>"
                "\x1b(B\x1b[!p\x1b[<0;1;2M\x1b[12;24;1;1;1T\x1b%Gok\x1b[1$}\x1b[4:3m")
    assert lines(page)[0] == "link ok"
    assert sent(page) == []
    write(page, "\r\n\x1b(0lqk\x1b(B x \x1b)0\x0eq\x0fq")  # DEC line drawing through G0 and G1 (SO / SI)
    assert lines(page)[1] == "┌─┐ x ─q"
    write(page, "\x1b]0;first\x07\x1b]2;second\x1b\\\x1b]1;icon\x07")
    assert page.evaluate("() => term.title") == "second"
    write(page, "\x1b[31mabc\x1bc")  # RIS
    assert lines(page)[:2] == ["", ""] and cursor(page) == {"x": 0, "y": 0}
    write(page, "d\x1b[4hab\x1b[2Dc\x1b[4l\x1b[2;1HZ\x1b[2b")  # insert mode, REP
    assert lines(page)[:2] == ["dcab", "ZZZ"] and attrs(page, 0, 0)["fg"] is None


def test_resize_keeps_content(page: Any) -> None:
    resize(page, 10, 4)
    write(page, "abcdefghij\r\nline2\r\nline3\r\nline4")
    assert cursor(page) == {"x": 5, "y": 3}
    resize(page, 5, 4)
    assert lines(page) == ["abcde", "line2", "line3", "line4"]
    assert cursor(page) == {"x": 4, "y": 3}
    resize(page, 5, 2)  # the rows above the cursor go to the scrollback
    assert lines(page) == ["line3", "line4"]
    assert cursor(page) == {"x": 4, "y": 1}
    resize(page, 8, 5)  # and come back
    assert lines(page) == ["abcde", "line2", "line3", "line4", ""]
    assert cursor(page) == {"x": 4, "y": 3}
    write(page, "\x1b[2;3r")
    resize(page, 8, 3)
    write(page, "\x1b[3;1H\nend")  # the region was reset
    assert lines(page) == ["line3", "line4", "end"]
    page.evaluate(FRAME)
    assert page.evaluate(SCREEN_ROWS) == ["line3", "line4", "end "]


def test_rendering(page: Any) -> None:
    write(page, "plain \x1b[31mred\x1b[0m \x1b[1;4mbold\x1b[0m\r\n\x1b[7minv\x1b[0m\r\n")
    page.evaluate(FRAME)
    assert page.evaluate("() => document.getElementById('t').classList.contains('det-terminal')")
    assert page.evaluate(SCREEN_ROWS)[:3] == ["plain red bold", "inv", " "]  # the cursor's cell on row 2
    spans = page.evaluate("""() => Array.from(document.querySelectorAll('.det-term-screen > .det-term-row'))
      .slice(0, 2).map((r) => Array.from(r.querySelectorAll('span')).map((s) => { const c = getComputedStyle(s);
        return [s.textContent, c.color, c.backgroundColor, c.fontWeight, c.textDecorationLine]; }))""")
    plain = ["rgb(212, 212, 212)", "rgba(0, 0, 0, 0)", "400", "none"]
    assert spans[0] == [["plain ", *plain], ["red", "rgb(205, 49, 49)", "rgba(0, 0, 0, 0)", "400", "none"],
                        [" ", *plain], ["bold", "rgb(212, 212, 212)", "rgba(0, 0, 0, 0)", "700", "underline"]]
    assert spans[1] == [["inv", "rgb(30, 30, 30)", "rgb(212, 212, 212)", "400", "none"]]
    style = page.evaluate("""() => { const c = getComputedStyle(document.querySelector('.det-term-row'));
                                     return [c.whiteSpace, c.fontFamily]; }""")
    assert style[0] == "pre" and "monospace" in style[1]
    assert page.evaluate("() => getComputedStyle(document.getElementById('t')).backgroundColor") == "rgb(30, 30, 30)"
    where = "() => Array.from(document.querySelectorAll('.det-term-cursor')).map((c) => [c.parentElement === " \
            "document.querySelectorAll('.det-term-screen > .det-term-row')[term.cursor().y], c.textContent])"
    assert page.evaluate(where) == [[True, " "]]

    # Writes show in text() at once; the rows follow at the next frame, only the rows that changed.
    marked = page.evaluate("""() => { const rows = document.querySelectorAll('.det-term-screen > .det-term-row');
      rows[0].firstChild.marked = true; term.write('\\x1b[5;3Hnew');
      return [term.text().split('\\n')[4], rows[4].textContent]; }""")
    assert marked == ["  new", ""]
    page.evaluate(FRAME)
    assert page.evaluate(SCREEN_ROWS)[4] == "  new "
    assert page.evaluate("() => document.querySelector('.det-term-row').firstChild.marked") is True
    write(page, "\x1b[?25l")
    page.evaluate(FRAME)
    assert page.evaluate(where) == []
    assert page.evaluate(SCREEN_ROWS)[4] == "  new"


def test_keyboard(page: Any) -> None:
    page.click("#t")
    assert page.evaluate("() => document.activeElement.className") == "det-term-input"
    page.keyboard.type("ls -la é")
    assert "".join(sent(page)) == "ls -la é"
    assert page.evaluate("() => document.activeElement.value") == ""
    keys = [("Enter", "\r"), ("Backspace", "\x7f"), ("ArrowUp", "\x1b[A"), ("ArrowLeft", "\x1b[D"), ("Tab", "\t"),
            ("Escape", "\x1b"), ("Control+c", "\x03"), ("Control+d", "\x04"), ("Control+BracketLeft", "\x1b"),
            ("Control+Space", "\x00"), ("Alt+b", "\x1bb"), ("Home", "\x1b[H"), ("End", "\x1b[F"),
            ("PageUp", "\x1b[5~"), ("PageDown", "\x1b[6~"), ("Delete", "\x1b[3~"), ("Insert", "\x1b[2~"),
            ("F1", "\x1bOP"), ("F4", "\x1bOS"), ("F5", "\x1b[15~"), ("F12", "\x1b[24~"), ("Shift+Tab", "\x1b[Z"),
            ("Control+ArrowRight", "\x1b[1;5C")]
    for key, expected in keys:
        page.keyboard.press(key)
        assert sent(page) == [expected], key
    write(page, "\x1b[?1h")  # application cursor keys
    page.keyboard.press("ArrowUp")
    page.keyboard.press("ArrowRight")
    assert sent(page) == ["\x1bOA", "\x1bOC"]
    write(page, "\x1b[?1l")
    page.keyboard.press("ArrowDown")
    assert sent(page) == ["\x1b[B"]
    page.keyboard.press("Control+Shift+C")  # nothing selected: left to the browser
    assert sent(page) == []

    # Text selected with the mouse: Ctrl+C and Ctrl+Shift+C copy it; typing goes on to the terminal.
    page.evaluate("() => { window.copies = []; document.addEventListener('copy', "
                  "() => window.copies.push(window.getSelection().toString())); }")
    write(page, "\x1b[H\x1b[2Jcopy me")
    page.evaluate(FRAME)
    box = page.evaluate("() => { const r = document.querySelector('.det-term-row').getBoundingClientRect(); "
                        "return [r.left, r.top + r.height / 2, term.cell.width]; }")
    page.mouse.move(box[0] + 1, box[1])
    page.mouse.down()
    page.mouse.move(box[0] + box[2] * 7.2, box[1], steps=4)
    page.mouse.up()
    assert page.evaluate("() => window.getSelection().toString()") == "copy me"
    page.keyboard.press("Control+c")
    page.keyboard.press("Control+Shift+C")
    assert sent(page) == []
    assert page.evaluate("() => window.copies") == ["copy me", "copy me"]
    page.keyboard.type("ab")
    assert sent(page) == ["a", "b"]
    assert page.evaluate("() => [document.activeElement.className, window.getSelection().toString()]") == [
        "det-term-input", ""]
    page.keyboard.press("Control+c")
    assert sent(page) == ["\x03"]
    page.evaluate("() => window.getSelection().selectAllChildren(document.querySelector('.det-term-row'))")
    page.keyboard.press("Enter")  # a key sent clears the selection: Ctrl+C interrupts again
    page.keyboard.press("Control+c")
    assert sent(page) == ["\r", "\x03"]


def test_paste(page: Any) -> None:
    paste = """(text) => { const data = new DataTransfer(); data.setData('text/plain', text);
      document.querySelector('.det-term-input').dispatchEvent(
        new ClipboardEvent('paste', {clipboardData: data, bubbles: true, cancelable: true})); }"""
    page.evaluate("() => term.focus()")
    page.evaluate(paste, "echo a\nb")
    assert sent(page) == ["echo a\rb"]
    write(page, "\x1b[?2004h")
    page.evaluate(paste, "x\r\ny\x1b[201~z")
    assert sent(page) == ["\x1b[200~x\ryz\x1b[201~"]
    write(page, "\x1b[?2004l")
    page.evaluate(paste, "plain")
    assert sent(page) == ["plain"]
    assert page.evaluate("() => document.querySelector('.det-term-input').value") == ""


def test_fit_measures_the_cell(page: Any) -> None:
    page.evaluate("() => term.fit()")
    measured = page.evaluate("""() => { const v = document.querySelector('.det-term-viewport'), c = getComputedStyle(v);
      const row = document.createElement('div'); row.className = 'det-term-row';
      const span = document.createElement('span'); span.textContent = 'X'.repeat(100); row.appendChild(span);
      document.querySelector('.det-term-screen').appendChild(row);
      const cell = [span.getBoundingClientRect().width / 100, row.getBoundingClientRect().height];
      row.remove();
      return {cell, width: v.clientWidth - parseFloat(c.paddingLeft) - parseFloat(c.paddingRight),
              height: v.clientHeight - parseFloat(c.paddingTop) - parseFloat(c.paddingBottom)}; }""")
    width, height = measured["cell"]
    assert 5 < width < 15 and 10 < height < 30
    expected = [int(measured["width"] // width), int(measured["height"] // height)]
    assert page.evaluate("() => window.resizes") == [expected]
    assert page.evaluate("() => [term.cols, term.rows]") == expected
    assert expected[0] > 80 and expected[1] < 24  # 800x400 px
    page.evaluate("() => term.fit()")  # the same size: no second call
    assert page.evaluate("() => window.resizes") == [expected]
    page.evaluate(FRAME)
    assert len(page.evaluate(SCREEN_ROWS)) == expected[1]


def test_phone_width(page: Any) -> None:
    page.set_viewport_size({"width": 360, "height": 640})
    load(page, '<div id="t" style="height:300px"></div>')
    write(page, "x" * 300 + "\r\n\x1b[?7l" + "y" * 200 + "\x1b[?7h")
    page.evaluate(FRAME)
    overflow = "() => [document.documentElement.scrollWidth, document.body.scrollWidth, window.innerWidth]"
    assert max(page.evaluate(overflow)[:2]) <= 360  # 80 columns before fit(): clipped
    page.evaluate("() => term.fit()")
    page.click("#t")
    page.evaluate(FRAME)
    cols, rows = page.evaluate("() => [term.cols, term.rows]")
    assert page.evaluate("() => window.resizes") == [[cols, rows]]
    assert 30 <= cols < 45 and rows >= 10
    box = page.evaluate("""() => { const t = document.getElementById('t').getBoundingClientRect();
      const r = document.querySelector('.det-term-screen > .det-term-row').getBoundingClientRect();
      return [t.right, term.cell.width * term.cols + r.left]; }""")
    assert box[1] <= box[0] <= 360
    assert max(page.evaluate(overflow)[:2]) <= 360
    page.evaluate("() => term.dispose()")
    assert page.evaluate("() => [document.getElementById('t').childElementCount, "
                         "document.getElementById('t').className]") == [0, ""]
    write(page, "after dispose")  # ignored


def test_runs_under_the_pages_csp(context: Any) -> None:
    """Loaded as files under `script-src 'self'` (no eval, no inline handlers): it works, no CSP violation."""
    files = {"/": ("text/html", '<link rel="stylesheet" href="/terminal.css"><div id="t" style="height:200px"></div>'
                   '<script src="/terminal.js"></script><script src="/start.js"></script>'),
             "/terminal.js": ("text/javascript", (STATIC / "terminal.js").read_text()),
             "/terminal.css": ("text/css", (STATIC / "terminal.css").read_text()),
             "/start.js": ("text/javascript", "\n".join([
                 "window.violations = []; window.sent = [];",
                 "document.addEventListener('securitypolicyviolation', (e) => violations.push(e.violatedDirective));",
                 "window.term = new DetTerminal(document.getElementById('t'), {onData: (d) => sent.push(d)});",
                 "term.fit(); term.write('\\x1b[1;31mcsp\\x1b[0m ok');"]))}
    csp = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'"

    def serve(route: Any) -> None:
        kind, body = files[route.request.url.split("terminal.test", 1)[1]]
        route.fulfill(status=200, content_type=kind, body=body, headers={"Content-Security-Policy": csp})

    page = context.new_page()
    errors: List[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.route("http://terminal.test/**", serve)
        page.goto("http://terminal.test/")
        page.evaluate(FRAME)
        page.click("#t")
        page.keyboard.type("ls")
        page.keyboard.press("Enter")
        state = page.evaluate("() => [term.text().split('\\n')[0], sent.join(''), violations]")
        assert state == ["csp ok", "ls\r", []]
        assert page.evaluate(SCREEN_ROWS)[0] == "csp ok "
        assert errors == []
    finally:
        page.close()
