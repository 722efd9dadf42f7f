"""The import's run: each kind's rows read from the source, sent in batches to the master's import routes, counted.

The master records every row (determined/master/imports/determined.py), so a re-run sends everything again and
the master answers "already there"; metric and log tables start after the watermark the master reports."""
import dataclasses
import queue
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, TypeVar

from determined import errors
from determined.experimental.determined_import._source import Source

KINDS = ("users", "workspaces", "projects", "experiments", "trials", "metrics", "checkpoints", "models",
         "model_versions", "logs")
BATCH = {"experiments": 10, "metrics": 20000, "logs": 5000}
DEFAULT_BATCH = 1000


@dataclasses.dataclass
class Counts:
    read: int = 0
    imported: int = 0
    skipped: int = 0
    already: int = 0


@dataclasses.dataclass
class Summary:
    source: str
    generation: str
    dry_run: bool
    counts: Dict[str, Counts] = dataclasses.field(default_factory=dict)
    skipped: List[Tuple[str, str, str]] = dataclasses.field(default_factory=list)  # (kind, old id, reason)

    def add(self, kind: str, read: int, answer: Dict[str, Any]) -> None:
        c = self.counts.setdefault(kind, Counts())
        c.read += read
        c.imported += int(answer["imported"])
        c.already += int(answer["already"])
        c.skipped += len(answer["skipped"])
        self.skipped.extend((kind, s["old_id"], s["reason"]) for s in answer["skipped"])


Progress = Callable[[str, int, int], None]  # (kind, rows done, rows in all)


def _post(session: Any, kind: str, body: Dict[str, Any]) -> Dict[str, Any]:
    """POST one batch; a batch larger than the master takes (413) is sent again in halves. The body is encoded once,
    by the session: a batch far under the limit (20,000 metric rows are ~2.5 MiB of the 16 MiB) is not measured
    first."""
    rows = body["rows"]
    try:
        return dict(session.post(f"/imports/determined/{kind}", body))
    except errors.APIError as e:
        if e.status_code != 413 or len(rows) < 2:
            raise
    half = len(rows) // 2
    first = _post(session, kind, {**body, "rows": rows[:half]})
    second = _post(session, kind, {**body, "rows": rows[half:]})
    return {"imported": first["imported"] + second["imported"], "already": first["already"] + second["already"],
            "skipped": first["skipped"] + second["skipped"]}


METRIC_COLUMNS = ("id", "trial_id", "group", "total_batches", "end_time", "metrics", "batch_metrics", "archived")
"""The cells of a metric row on the wire (the route's MetricsBatch.columns), as Source.metrics reads them."""


def _metric_body(base: Dict[str, Any], table: str, partition: str, rows: Sequence[Any]) -> Dict[str, Any]:
    """A columnar batch of metric rows: the column names once, each row a list of its cells."""
    return {**base, "table": table, "partition": partition, "columns": list(METRIC_COLUMNS), "rows": rows}


T = TypeVar("T")
_END = object()


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def read_ahead(batches: Iterator[T], depth: int = 2) -> Iterator[T]:
    """The items of `batches`, read in a thread of their own up to `depth` ahead of the one the caller is sending:
    the source's read of the next batch overlaps the master's write of this one. The thread alone runs `batches`
    (and so the source's connection) until it ends; when the caller stops early (an error, Ctrl-C), the thread is
    told to stop, closes `batches` (its transaction ends) and is waited for, so the source is usable again."""
    q: "queue.Queue[Any]" = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work() -> None:
        try:
            for item in batches:
                if not put(item):
                    break
            else:
                put(_END)
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread, raised there
            put(_Failed(e))
        finally:
            close = getattr(batches, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=work, name="det-import-read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item = q.get()
            if item is _END:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        stop.set()
        thread.join()


def _totals(source: Source, with_logs: bool) -> Dict[str, int]:
    return {"users": source.count("users"), "workspaces": source.count("workspaces"),
            "projects": source.count("projects"), "experiments": source.count("experiments"),
            "trials": source.count("trials"),
            "metrics": sum(source.count(t) for t, _ in source.metric_tables()),
            "checkpoints": source.checkpoint_count(), "models": source.count("models"),
            "model_versions": source.count("model_versions"),
            "logs": source.count("task_logs") if with_logs else 0}


def run_import(session: Any, source: Source, *, dry_run: bool = False, logs: bool = False,
               progress: Optional[Progress] = None, batch: Optional[Dict[str, int]] = None) -> Summary:
    """Import `source` through `session` (an admin's session to the master); what each kind did."""
    sizes = {**BATCH, **(batch or {})}
    summary = Summary(source.cluster_id, source.generation, dry_run)
    base = {"source": source.cluster_id, "dry_run": dry_run}
    state = session.get("/imports/determined/progress", params={"source": source.cluster_id})
    marks: Dict[str, int] = dict(state["watermarks"])
    totals = _totals(source, logs)
    note = progress or (lambda kind, done, total: None)

    def rows_of(kind: str) -> Iterator[List[Dict[str, Any]]]:
        size = sizes.get(kind, DEFAULT_BATCH)
        return getattr(source, kind)(size)  # type: ignore[no-any-return]

    for kind in KINDS:
        done = 0
        summary.counts.setdefault(kind, Counts())
        note(kind, 0, totals[kind])
        if kind == "metrics":
            for table, partition in source.metric_tables():
                mark = marks.get(table, 0)
                there = source.count(table, "WHERE id <= %s", (mark,)) if mark else 0
                summary.counts[kind].read += there
                summary.counts[kind].already += there
                done += there
                for rows in read_ahead(source.metrics(table, partition, mark, sizes["metrics"])):
                    summary.add(kind, len(rows), _post(session, kind, _metric_body(base, table, partition, rows)))
                    done += len(rows)
                    note(kind, done, totals[kind])
        elif kind == "logs":
            if not logs or not source.has("task_logs"):
                continue
            mark = marks.get("task_logs", 0)
            there = source.count("task_logs", "WHERE id <= %s", (mark,)) if mark else 0
            summary.counts[kind].read += there
            summary.counts[kind].already += there
            done += there
            for rows, others in read_ahead(source.logs(mark, sizes["logs"])):
                if rows:
                    summary.add(kind, len(rows), _post(session, kind, {**base, "table": "task_logs", "rows": rows}))
                for task, n in others.items():
                    summary.counts[kind].read += n
                    summary.counts[kind].skipped += n
                    summary.skipped.append((kind, f"task {task}", f"{n} log lines of a task that is no trial "
                                                                  "(a command, notebook, shell or tensorboard)"))
                done += len(rows) + sum(others.values())
                note(kind, done, totals[kind])
        else:
            for rows in rows_of(kind):
                if rows:
                    summary.add(kind, len(rows), _post(session, kind, {**base, "rows": rows}))
                done += len(rows)
                note(kind, done, totals[kind])
    return summary


def check_admin(session: Any) -> None:
    """A clear refusal before reading anything when the session's user is not an admin."""
    try:
        session.get("/imports/determined/progress", params={"source": "-"})
    except errors.APIError as e:
        if e.status_code == 403:
            raise errors.DeterminedError(f"det import determined: {e}") from None
        raise
