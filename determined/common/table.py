"""Text tables that fit the terminal: numbers and UUIDs are never cut, hyperparameter columns go first, then long
text is shortened with `…` (never inside a number or a UUID: one that does not fit whole is left out whole), a
column of `name=value` parts (WRAP) wraps onto more lines, then the least useful columns go, and a WRAP column
that still does not fit moves under each row; what was left out is named under the table.

Every cell is written with determined.common.formats (one number and time format) and with control characters
escaped (a description can never move the cursor or recolour the terminal).
"""
import dataclasses
import os
import re
import shutil
import sys
import unicodedata
from typing import Any, List, Optional, Sequence, TextIO

from determined.common.formats import escape_control, fmt_number

KEY, NUMBER, TEXT, HPARAM, WRAP = "key", "number", "text", "hparam", "wrap"
GAP = "  "
MIN_TEXT = 10
COMFORTABLE_TEXT = 24


@dataclasses.dataclass
class Column:
    """A column: `kind` is KEY (always shown, never cut), NUMBER (never cut, right-aligned), TEXT (may be
    shortened), WRAP (parts separated by ", " or spaces, such as metrics `a=0.1, b=2`: wrapped between its parts,
    never cut; under its row when even its longest part does not fit) or HPARAM (a hyperparameter: left out first).
    Columns with a `drop` rank are left out, highest rank first, when the table still does not fit."""

    header: str
    kind: str = TEXT
    drop: int = 0
    align: Optional[str] = None

    @property
    def right(self) -> bool:
        return (self.align or ("right" if self.kind in (NUMBER, HPARAM) else "left")) == "right"


def cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return fmt_number(value)
    return escape_control(value)


def text_width(text: str) -> int:
    """Columns a string takes in a terminal (wide East Asian characters take two)."""
    if text.isascii():
        return len(text)
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 0 if unicodedata.combining(ch) else 1
               for ch in text)


# What a shortened text never ends inside: a UUID, a number (with its sign, decimals and exponent).
_WHOLE = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
                    r"|[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


def _cut(text: str, width: int) -> str:
    if text_width(text) <= width:
        return text
    out, used = "", 0
    for ch in text:
        w = text_width(ch)
        if used + w > width - 1:
            break
        out += ch
        used += w
    end = len(out)
    for found in _WHOLE.finditer(text):  # a number or UUID the cut would split is left out whole
        if found.start() >= end:
            break
        if end < found.end():
            out = out[:found.start()]
            break
    return out + "…"


def _parts(text: str) -> List[str]:
    """A WRAP cell's parts: the pieces between ", " (each keeping its comma) or spaces; never broken."""
    return text.split()


def _wrap_cell(text: str, width: int) -> List[str]:
    """A WRAP cell on lines of at most `width` (a part longer than that alone on its line)."""
    lines: List[str] = []
    for part in _parts(text):
        if lines and text_width(lines[-1]) + 1 + text_width(part) <= width:
            lines[-1] += " " + part
        else:
            lines.append(part)
    return lines or [""]


def _pad(text: str, width: int, right: bool) -> str:
    fill = " " * (width - text_width(text))
    return fill + text if right else text + fill


def terminal_width(stream: Optional[TextIO] = None) -> Optional[int]:
    """The width to fit: the terminal's, `$COLUMNS` when set; None (no limit) when output goes to a file or pipe."""
    stream = stream or sys.stdout
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        if stream.isatty():
            return shutil.get_terminal_size().columns
    except (AttributeError, ValueError, OSError):
        pass
    return None


def render(columns: Sequence[Column], rows: Sequence[Sequence[Any]], width: Optional[int] = None) -> List[str]:
    """The table's lines, fitted into `width` columns (no limit when None)."""
    cells = [[cell_text(v) for v in row] for row in rows]
    natural = [max([text_width(c.header)] + [text_width(r[i]) for r in cells]) for i, c in enumerate(columns)]
    # the narrowest a WRAP column gets: its longest part (and its header)
    least_wrap = [max([text_width(c.header)] + [text_width(p) for r in cells for p in _parts(r[i])])
                  if c.kind == WRAP else 0 for i, c in enumerate(columns)]
    shown = list(range(len(columns)))
    sizes = list(natural)
    below: List[int] = []  # WRAP columns moved under each row

    def total() -> int:
        return sum(sizes[i] for i in shown) + len(GAP) * max(0, len(shown) - 1)

    left_out: List[str] = []
    if width is not None:
        for i in reversed(range(len(columns))):  # hyperparameters first, the last one first
            if total() <= width:
                break
            if columns[i].kind == HPARAM:
                shown.remove(i)
                left_out.insert(0, columns[i].header)
        def shorten(least: int) -> None:  # shorten text, the widest first, down to `least` characters
            texts = [i for i in shown if columns[i].kind == TEXT]
            while total() > width and texts:
                widest = max(texts, key=lambda i: sizes[i])
                floor = max(min(natural[widest], least), min(text_width(columns[widest].header), least))
                if sizes[widest] <= floor:
                    texts.remove(widest)
                    continue
                sizes[widest] = max(floor, sizes[widest] - (total() - width))

        def narrow_wraps() -> None:  # wrap WRAP columns, the widest first, down to their longest part
            for i in sorted((i for i in shown if columns[i].kind == WRAP), key=lambda i: -sizes[i]):
                if total() > width:
                    sizes[i] = max(least_wrap[i], sizes[i] - (total() - width))

        shorten(COMFORTABLE_TEXT)  # then text to a readable width
        narrow_wraps()  # then wrap the columns of parts
        for i in sorted((i for i in shown if columns[i].drop), key=lambda i: -columns[i].drop):
            if total() <= width:  # then the least useful columns
                break
            shown.remove(i)
            left_out.append(columns[i].header)
        shorten(MIN_TEXT)  # then text to its least
        for i in [i for i in shown if columns[i].kind == WRAP]:  # then what still does not fit goes under its row
            if total() <= width:
                break
            shown.remove(i)
            below.append(i)
    lines = [GAP.join(_pad(_cut(columns[i].header, sizes[i]), sizes[i], columns[i].right) for i in shown).rstrip(),
             GAP.join("-" * sizes[i] for i in shown)]
    for row in cells:
        grid = [_wrap_cell(row[i], sizes[i]) if columns[i].kind == WRAP else [_cut(row[i], sizes[i])] for i in shown]
        for n in range(max((len(g) for g in grid), default=1)):
            lines.append(GAP.join(_pad(g[n] if n < len(g) else "", sizes[i], columns[i].right)
                                  for g, i in zip(grid, shown)).rstrip())
        for i in below:
            if row[i]:
                indent = "  "
                lines += [indent + line for line in _wrap_cell(f"{columns[i].header}: {row[i]}",
                                                                max(1, (width or 0) - len(indent)))]
    if left_out:
        lines += wrap(f"(not shown to fit {width} columns: {', '.join(left_out)}; widen the terminal or use --json)", width)
    return lines


def wrap(text: str, width: Optional[int]) -> List[str]:
    """A note on as many lines of `width` as it needs (broken at spaces)."""
    import textwrap

    return textwrap.wrap(text, width, break_on_hyphens=False) if width and len(text) > width else [text]


def print_table(columns: Sequence[Column], rows: Sequence[Sequence[Any]], title: Optional[str] = None,
                empty: Optional[str] = None) -> None:
    """Print a table fitted to the terminal; `empty` is printed instead when there are no rows."""
    if title:
        print(escape_control(title))
    if not rows and empty:
        print(empty)
        return
    print("\n".join(render(columns, rows, terminal_width())))
