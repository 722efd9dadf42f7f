"""Output helpers: text tables for people (fitted to the terminal, see _table.py), stable JSON for programs.

Light on purpose: read commands import this and nothing of the server stack or of rich.
"""
import json
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from determined.common.table import HPARAM, KEY, NUMBER, TEXT, WRAP, Column, print_table
from determined.common.formats import escape_control, fmt_bytes, fmt_duration, fmt_number, fmt_time

__all__ = ["HPARAM", "KEY", "NUMBER", "TEXT", "WRAP", "Column", "csv_rows", "fmt_bytes", "fmt_duration", "fmt_metric",
           "fields", "fmt_time", "metrics_text", "print_json", "print_table", "say", "table"]


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True, default=str))


def say(text: str) -> None:
    """Print a line that holds text users typed (names, descriptions), with control characters escaped."""
    print(escape_control(text))


_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_METRICS = re.compile(r"[^=, ]+=[^,]*(, [^=, ]+=[^,]*)*")  # what metrics_text writes


def _kind(values: Sequence[Any]) -> str:
    """NUMBER for numbers, KEY for UUIDs (never cut), WRAP for metrics (`a=0.1, b=2`: wrapped, never cut), else
    TEXT."""
    if not values:
        return TEXT
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return NUMBER
    if all(isinstance(v, str) and _UUID.fullmatch(v) for v in values):
        return KEY
    if all(isinstance(v, str) and _METRICS.fullmatch(v) for v in values):
        return WRAP
    return TEXT


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], title: Optional[str] = None,
          empty: Optional[str] = None) -> None:
    """A table whose columns of numbers are NUMBER columns, of UUIDs KEY, of metrics WRAP and the others TEXT."""
    rows = [list(r) for r in rows]
    columns = [Column(header, _kind([r[i] for r in rows if r[i] not in (None, "")]))
               for i, header in enumerate(headers)]
    print_table(columns, rows, title=title, empty=empty)


def fields(pairs: Sequence[Tuple[str, Any]], title: Optional[str] = None) -> None:
    """One object's fields, one per line (`Name   value`), long values wrapped to the terminal."""
    import textwrap

    from determined.common.table import cell_text, terminal_width

    if title:
        print(escape_control(title))
    pairs = [(k, v) for k, v in pairs if v not in (None, "")]
    key_width = max((len(k) for k, _ in pairs), default=0)
    width = terminal_width()
    for key, value in pairs:
        text = cell_text(value)
        if width and key_width + 2 + len(text) > width and width > key_width + 22:
            lines = textwrap.wrap(text, width - key_width - 2) or [""]
        else:
            lines = [text]
        print(f"{key:<{key_width}}  {lines[0]}")
        for line in lines[1:]:
            print(" " * (key_width + 2) + line)


def fmt_metric(value: Any) -> str:
    return fmt_number(value)


def metrics_text(metrics: Optional[Dict[str, Any]]) -> str:
    if not metrics:
        return ""
    return ", ".join(f"{k}={fmt_number(v)}" for k, v in sorted(metrics.items()))


def csv_rows(headers: List[str], rows: Iterable[Sequence[Any]]) -> None:
    import csv
    import sys

    w = csv.writer(sys.stdout, lineterminator="\n")
    w.writerow(headers)
    for r in rows:
        w.writerow(["" if v is None else escape_control(v) if isinstance(v, str) else v for v in r])
