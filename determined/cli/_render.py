"""Output helpers: rich tables for people, stable JSON for programs."""
import datetime
import json
import sys
from typing import Any, Iterable, List, Optional, Sequence

from rich.console import Console
from rich.table import Table

console = Console() if sys.stdout.isatty() else Console(width=200)


def print_json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, sort_keys=True, default=str))


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], title: Optional[str] = None) -> None:
    t = Table(title=title, title_justify="left")
    for h in headers:
        t.add_column(h)
    for row in rows:
        t.add_row(*["" if v is None else str(v) for v in row])
    console.print(t)


def fmt_time(value: Optional[str]) -> str:
    if not value:
        return ""
    try:
        return datetime.datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M:%S")
    except ValueError:
        return value


def fmt_metric(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else str(value)


def metrics_text(metrics: Optional[dict]) -> str:
    if not metrics:
        return ""
    return ", ".join(f"{k}={fmt_metric(v)}" for k, v in sorted(metrics.items()))


def csv_rows(headers: List[str], rows: Iterable[Sequence[Any]]) -> None:
    import csv
    import sys

    w = csv.writer(sys.stdout)
    w.writerow(headers)
    for r in rows:
        w.writerow(["" if v is None else v for v in r])
