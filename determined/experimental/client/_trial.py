"""Trial (0.38; `TrialReference` is its 0.13 name): a trial's state, logs, metrics and checkpoints."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Dict, Iterator, List, Optional

from determined import errors
from determined.experimental.client import _ranking
from determined.experimental.client._checkpoint import Checkpoint, sorted_checkpoints
from determined.experimental.client._common import Connection, MasterBound, UsageError
from determined.experimental.client._enums import CheckpointSortBy, OrderBy, TrialState, state_of

if TYPE_CHECKING:  # the HTTP client is imported only where a session is opened
    from determined.common.api import Session
    from determined.experimental.client import _metrics  # (imported when metrics are read)
    from determined.experimental.client._experiment import Experiment


class Trial(MasterBound):
    """A trial of the master: its state (`reload()` refreshes the cached `experiment_id`, `hparams`, `state`,
    `summary_metrics`), logs, metrics and checkpoints."""

    # The Experiment class, set by determined.experimental.client._experiment, which imports this module: an
    # experiment holds its trials, so the imports go that one way and a trial reaches its experiment through this.
    _experiment_class: ClassVar[Any] = None

    def __init__(self, trial_id: int, master: Optional[str] = None, *,
                 _session: "Optional[Session | Connection]" = None) -> None:
        super().__init__(master, _session)
        self.id = trial_id
        self.experiment_id: Optional[int] = None
        self.hparams: Optional[Dict[str, Any]] = None
        self.state: Any = None
        self.summary_metrics: Optional[Dict[str, Any]] = None
        self.total_batches: Optional[int] = None
        self._json: Optional[Dict[str, Any]] = None

    def __repr__(self) -> str:
        return f"Trial(id={self.id})"

    def _update(self, t: Dict[str, Any]) -> "Trial":
        self._json = dict(t)
        self.experiment_id = t["experiment_id"]
        self.hparams = t.get("hparams")
        self.state = state_of(TrialState, t.get("state"))
        self.total_batches = t.get("total_batches")
        self.summary_metrics = {"best_validation": t.get("best_validation"),
                                "latest_validation": t.get("latest_validation")}
        return self

    def reload(self) -> None:
        """Read the trial's state, hyperparameters and summary metrics again."""
        self._read()

    def _read(self) -> Dict[str, Any]:
        """Read the trial again: the master's answer, with its reports and checkpoints."""
        answer = self._session.get(f"/trials/{self.id}")
        self._update(answer["trial"])
        return answer  # type: ignore[no-any-return]

    def to_json(self) -> Dict[str, Any]:
        """The master's record of the trial as of the last read (read now if never): id, experiment_id, state,
        hparams, total_batches, best_validation, start_time, ..."""
        if self._json is None:
            self.reload()
        return dict(self._json or {})

    def describe(self) -> Dict[str, Any]:
        """The trial's record read now, with the records of its reports and checkpoints: "training_metrics",
        "validation_metrics" (each report's steps_completed, metrics and end_time), "checkpoints", and
        "metric_groups" (the groups it reported: training, validation and those of report_metrics)."""
        answer = self._read()
        out = dict(answer["trial"])
        for key in ("training_metrics", "validation_metrics", "checkpoints"):
            out[key] = answer[key]
        out["metric_groups"] = answer.get("metric_groups", ["training", "validation"])
        return out

    def _experiment_config(self, experiment_id: int) -> Dict[str, Any]:
        exp = self._experiment_class(experiment_id, self._master, _session=self._connection)
        return exp.get_config()  # type: ignore[no-any-return]

    def get_experiment(self) -> "Experiment":
        """The experiment of this trial."""
        if self.experiment_id is None:
            self.reload()
        exp = self._experiment_class(int(self.experiment_id or 0), self._master, _session=self._connection)
        exp.reload()
        return exp  # type: ignore[no-any-return]

    def kill(self) -> None:
        """Kill the trial at once (its experiment goes on with its other trials)."""
        self._update(self._session.post(f"/trials/{self.id}/kill")["trial"])

    def iter_log_records(self, follow: bool = False, *, head: Optional[int] = None, tail: Optional[int] = None,
                         rank_ids: Optional[List[int]] = None, stdtypes: Optional[List[str]] = None,
                         min_level: Any = None, timestamp_before: Any = None, timestamp_after: Any = None,
                         sources: Optional[List[str]] = None,
                         search_text: Optional[str] = None) -> Iterator[Dict[str, Any]]:
        """The trial's log lines as the master records them (id, timestamp, stream, source, level, rank_id,
        message), with the filters of `iter_logs`."""
        from determined.experimental import _logs

        return _logs.trial_logs(self._session, self.id, follow=follow, head=head, tail=tail, rank_ids=rank_ids,
                                stdtypes=stdtypes, min_level=min_level, timestamp_before=timestamp_before,
                                timestamp_after=timestamp_after, sources=sources, search_text=search_text)

    def iter_logs(self, follow: bool = False, *, head: Optional[int] = None, tail: Optional[int] = None,
                  container_ids: Optional[List[str]] = None, rank_ids: Optional[List[int]] = None,
                  stdtypes: Optional[List[str]] = None, min_level: Any = None, timestamp_before: Any = None,
                  timestamp_after: Any = None, sources: Optional[List[str]] = None,
                  search_text: Optional[str] = None) -> Iterator[str]:
        """The trial's log lines (each ending in a newline): the first `head`, the last `tail`, or all; with
        `follow`, then new lines until the trial ends. Filters: `rank_ids` (a `[rank=N]` prefix), `stdtypes`
        (stdout, stderr), `min_level` (TRACE ... CRITICAL, or a LogLevel), `timestamp_before`/`_after` (ISO
        times), `sources` (trial, master) and `search_text`. `container_ids` is accepted and ignores nothing:
        trials here run in processes, not containers."""
        del container_ids
        for line in self.iter_log_records(follow, head=head, tail=tail, rank_ids=rank_ids, stdtypes=stdtypes,
                                          min_level=min_level, timestamp_before=timestamp_before,
                                          timestamp_after=timestamp_after, sources=sources, search_text=search_text):
            yield line["message"] + "\n"

    def logs(self, follow: bool = False, **kwargs: Any) -> Iterator[str]:
        """The trial's log lines (deprecated in 0.38: iter_logs)."""
        return self.iter_logs(follow, **kwargs)

    def iter_metrics(self, group: str) -> Iterator[_metrics.TrialMetrics]:
        """The metrics of `group` (training, validation, or a group of report_metrics) the trial reported."""
        from determined.experimental.client import _metrics

        return _metrics.trial_metrics(self._session, self.id, group)

    def metrics_json(self, group: str) -> List[Dict[str, Any]]:
        """The records of the trial's reports of metric group `group` (steps_completed, metrics, end_time, ...),
        by steps_completed: for tables and JSON output (`iter_metrics` gives TrialMetrics)."""
        from determined.experimental.client import _metrics

        return _metrics.trial_metric_records(self._session, self.id, group)

    def stream_metrics(self, group: str) -> Iterator[_metrics.TrialMetrics]:
        """Deprecated name of iter_metrics."""
        return self.iter_metrics(group)

    def stream_training_metrics(self) -> Iterator[_metrics.TrainingMetrics]:
        return self.iter_metrics("training")  # type: ignore[return-value]

    def stream_validation_metrics(self) -> Iterator[_metrics.ValidationMetrics]:
        return self.iter_metrics("validation")  # type: ignore[return-value]

    def list_checkpoints(self, sort_by: "Optional[str | CheckpointSortBy]" = None,
                         order_by: Optional[OrderBy] = None, max_results: Optional[int] = None) -> List[Checkpoint]:
        """The trial's COMPLETED checkpoints, sorted by `sort_by` (a CheckpointSortBy or a validation metric's
        name) in `order_by` order (give both or neither; default: the searcher's metric, best first)."""
        answer = self._read()
        config = self._experiment_config(answer["trial"]["experiment_id"])
        return sorted_checkpoints(self._connection, self._master, answer["checkpoints"], config, sort_by, order_by,
                                  max_results)

    def get_checkpoints(self, sort_by: Any = None, order_by: Any = None,
                        max_results: Optional[int] = None) -> List[Checkpoint]:
        """Deprecated name of list_checkpoints."""
        return self.list_checkpoints(sort_by, order_by, max_results)

    def top_checkpoint(self, sort_by: Optional[str] = None, smaller_is_better: Optional[bool] = None) -> Checkpoint:
        """The trial's checkpoint with the best validation metric (`sort_by`, default the searcher's metric)."""
        return self.select_checkpoint(best=True, sort_by=sort_by, smaller_is_better=smaller_is_better)

    def select_checkpoint(
        self,
        latest: bool = False,
        best: bool = False,
        uuid: Optional[str] = None,
        sort_by: Optional[str] = None,
        smaller_is_better: Optional[bool] = None,
    ) -> Checkpoint:
        """One checkpoint of the trial: the latest, the best, or the one with `uuid` (exactly one of them).

        `sort_by` and `smaller_is_better` go only with `best`; unset, the searcher's metric and direction
        are used.
        """
        chosen = [name for name, on in (("latest", latest), ("best", best), ("uuid", uuid is not None)) if on]
        if len(chosen) != 1:
            raise UsageError(
                "select_checkpoint() needs exactly one of latest=True, best=True or uuid=...; "
                + (f"got {' and '.join(chosen)}" if chosen else "got none")
            )
        if not best and (sort_by is not None or smaller_is_better is not None):
            raise UsageError("sort_by and smaller_is_better can only be used with best=True")
        if uuid is not None:
            return self._by_uuid(uuid)
        answer = self._read()
        checkpoints: List[Dict[str, Any]] = answer["checkpoints"]
        config = self._experiment_config(answer["trial"]["experiment_id"])
        if latest:
            completed = [c for c in checkpoints if c.get("state") == "COMPLETED"]
            if not completed:
                raise errors.DeterminedError(f"trial {self.id} has no COMPLETED checkpoints")
            chosen_ckpt = max(completed, key=lambda c: (int(c.get("steps_completed") or 0), c["end_time"] or ""))
        else:
            metric, sib = _ranking.criteria(config, sort_by, smaller_is_better)
            ranked = _ranking.ranked(checkpoints, metric, sib)
            if not ranked:
                raise _ranking.none_found(f"trial {self.id}", metric, checkpoints)
            chosen_ckpt = ranked[0]
        return Checkpoint._from_json(chosen_ckpt, config, self._connection, self._master)

    def _by_uuid(self, uuid: str) -> Checkpoint:
        data = self._session.get(f"/checkpoints/{uuid}")["checkpoint"]
        if data["trial_id"] != self.id:
            raise errors.DeterminedError(
                f"checkpoint {uuid} belongs to trial {data['trial_id']}, not trial {self.id}; "
                "use Determined().get_checkpoint(uuid) to get any checkpoint"
            )
        config = self._experiment_config(data["experiment_id"])
        return Checkpoint._from_json(data, config, self._connection, self._master)


TrialReference = Trial  # the 0.13 name
