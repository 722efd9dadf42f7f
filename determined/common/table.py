"""Text tables that fit the terminal: numbers are never cut, hyperparameter columns go first, then long text is
shortened with `…`, then the least useful columns go; what was left out is named under the table.

Every cell is written with determined.common.formats (one number and time format) and with control characters
escaped (a description can never move the cursor or recolour the terminal).
"""
import dataclasses
import os
import shutil
import sys
import unicodedata
from typing import Any, List, Optional, Sequence, TextIO

from determined.common.formats import escape_control, fmt_number

KEY, NUMBER, TEXT, HPARAM = "key", "number", "text", "hparam"
GAP = "  "
MIN_TEXT = 10
COMFORTABLE_TEXT = 24


@dataclasses.dataclass
class Column:
    """A column: `kind` is KEY (always shown, never cut), NUMBER (never cut, right-aligned), TEXT (may be
    shortened) or HPARAM (a hyperparameter: left out first). Columns with a `drop` rank are left out, highest
    rank first, when the table still does not fit."""

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
    return out + "…"


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
    shown = list(range(len(columns)))
    sizes = list(natural)

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

        shorten(COMFORTABLE_TEXT)  # then text to a readable width
        for i in sorted((i for i in shown if columns[i].drop), key=lambda i: -columns[i].drop):
            if total() <= width:  # then the least useful columns
                break
            shown.remove(i)
            left_out.append(columns[i].header)
        shorten(MIN_TEXT)  # then text to its least
    lines = [GAP.join(_pad(_cut(columns[i].header, sizes[i]), sizes[i], columns[i].right) for i in shown).rstrip(),
             GAP.join("-" * sizes[i] for i in shown)]
    for row in cells:
        lines.append(GAP.join(_pad(_cut(row[i], sizes[i]), sizes[i], columns[i].right) for i in shown).rstrip())
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
