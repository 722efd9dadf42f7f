"""TrialLoop: the searcher-operation loop and its bookkeeping, shared by the framework controllers.

A framework controller (PyTorch, Keras, Estimator) derives from TrialLoop and supplies only what is
framework-specific: train one batch, report the training metrics it collected, validate, checkpoint,
restore. TrialLoop decides, batch by batch, when to report, validate, checkpoint and stop, from the
experiment config (`scheduling_unit`, `min_validation_period`, `min_checkpoint_period`,
`checkpoint_policy`, `perform_initial_validation`, `searcher.metric`), and finishes each operation.
"""
import abc
import logging
import sys
import time
from typing import Any, Dict, Iterable, Iterator, Optional, Type

from determined import core, errors
from determined._trial import TrialController
from determined._trial_context import TrialContext

logger = logging.getLogger("determined")


def _length_to_batches(length: Any, global_batch_size: int, records_per_epoch: int) -> int:
    if isinstance(length, int):  # a 0.12-style value that skipped the config upgrade
        return length
    from determined.config import length_to_batches

    return int(length_to_batches(length, global_batch_size, records_per_epoch))


class Period(abc.ABC):
    """When something happens in a Schedule: `fires(batches)` after the batch that makes `batches` in total."""

    @abc.abstractmethod
    def fires(self, batches: int) -> bool:
        """Whether it happens once `batches` batches are trained."""

    def next_firing(self, batches: int) -> Optional[int]:
        """The smallest count above `batches` at which it fires (`NEVER` if none); None when it cannot tell."""
        return None


# A count of batches no loop reaches: what `Period.next_firing` returns for a period that never fires again.
NEVER = sys.maxsize
# While nothing is due, the loop looks for a preemption or a stop request at least this often (seconds).
QUIET_LOOK_S = 0.5


class Schedule:
    """When a TrialLoop reports training metrics, validates and checkpoints (the Trainer API's periods; None:
    never), instead of the experiment config's periods."""

    def __init__(self, reporting: Period, validation: Optional[Period], checkpoint: Optional[Period]) -> None:
        self.reporting = reporting
        self.validation = validation
        self.checkpoint = checkpoint


class TrialLoop(TrialController):
    """A TrialController that works through the searcher operations batch by batch.

    For each operation: train up to `op.length` batches in total, report training metrics every
    `scheduling_unit` batches, validate when `min_validation_period` is due, checkpoint when
    `min_checkpoint_period` or `checkpoint_policy` says so; at the end of the operation validate,
    checkpoint if anything is unsaved, and report the searcher metric. Preemption and stop requests are
    checked after every batch, stop requests also after every validation: the trial then checkpoints and
    stops (a stop the trial requested ends it COMPLETED; the searcher sees it exit early).
    """

    # The framework's logger, which the loop's own log lines go to.
    _logger = logger
    # Whether the chief tells the other ranks if the last validation was the best: needed where saving
    # a checkpoint runs collectives on every rank, so every rank must decide alike whether to save.
    _broadcast_validation_was_best = False

    def __init__(self, trial_class: Type[Any], context: TrialContext) -> None:
        super().__init__(trial_class, context)
        self.steps_completed = 0
        self._last_validation: Optional[int] = None
        self._last_validation_metrics: Optional[Dict[str, Any]] = None
        self._last_checkpoint = 0
        # When set (the Trainer API's fit()), it decides when to report, validate and checkpoint instead of the
        # config's scheduling_unit, min_validation_period and min_checkpoint_period.
        self._schedule: Optional[Schedule] = None

    def _read_config(self, config: Dict[str, Any]) -> None:
        gbs = self.context.get_hparams().get("global_batch_size", 0)
        rpe = int(config.get("records_per_epoch") or 0)

        def batches(key: str) -> int:
            return _length_to_batches(config.get(key) or {"batches": 0}, gbs, rpe)

        self._scheduling_unit = max(1, int(config.get("scheduling_unit") or 100))
        self._min_validation_period = batches("min_validation_period")
        self._min_checkpoint_period = batches("min_checkpoint_period")
        self._checkpoint_policy = config.get("checkpoint_policy") or "best"
        self._perform_initial_validation = bool(config.get("perform_initial_validation", False))
        self._searcher_metric: Optional[str] = (config.get("searcher") or {}).get("metric")
        self._average_training_metrics = bool((config.get("optimizations") or {}).get("average_training_metrics"))

    # -- what a framework supplies -------------------------------------------------------------------

    @abc.abstractmethod
    def _unreported_batches(self) -> int:
        """How many batches have training metrics not reported yet."""

    @abc.abstractmethod
    def _report_training_metrics(self) -> None:
        """Report the training metrics of the batches since the last report (if any)."""

    @abc.abstractmethod
    def _validate(self) -> Dict[str, Any]:
        """Validate, report the metrics and record them with `_validated`; returns the metrics."""

    @abc.abstractmethod
    def _checkpoint(self) -> None:
        """Save a checkpoint at `steps_completed` (through the chief) and set `_last_checkpoint`."""

    @abc.abstractmethod
    def _missing_searcher_metric(self, name: str, metrics: Dict[str, Any]) -> str:
        """The error message when the validation metrics lack the searcher metric `name`."""

    # -- the loop ------------------------------------------------------------------------------------

    def _maybe_validate_initially(self) -> None:
        if self._perform_initial_validation and self.steps_completed == 0 and self._last_validation is None:
            self._validate()

    def _after_batch(self, op: core.SearcherOperation) -> bool:
        """Report, stop, validate and checkpoint as due after a batch; False when the trial must stop."""
        stop = self._should_stop()
        done = self.steps_completed >= op._batches
        validation_due = self._validation_due()
        checkpoint_due = self._checkpoint_due()
        if stop or done or validation_due or checkpoint_due or self._report_due():
            self._report_training_metrics()
            # A callback of the report may have asked to stop (at the end of an operation: once it is complete).
            stop = stop or (not done and self._stop_requested_anywhere())
        if stop:
            return self._stop()
        if validation_due and not done:
            self._validate_and_maybe_checkpoint()
            if self._stop_requested_anywhere():  # e.g. by an early-stopping callback of the validation
                return self._stop()
        if not done and self._checkpoint_due():
            self._checkpoint()
        op._report_batches(self.steps_completed)
        return True

    def _complete(self, op: core.SearcherOperation) -> None:
        """Validate and checkpoint what is not yet, then report the searcher metric: the operation is done."""
        if self._last_validation != self.steps_completed or self._last_validation_metrics is None:
            self._validate_and_maybe_checkpoint()
        if self.steps_completed > self._last_checkpoint:
            self._checkpoint()
        metrics = self._last_validation_metrics or {}
        op.report_completed(self._searcher_metric_value(metrics) if self._needs_searcher_metric() else None)

    # -- stopping ------------------------------------------------------------------------------------

    def _should_stop(self) -> bool:
        """Whether to checkpoint and stop after this batch: the master's preemption (the chief asks), or a
        stop requested by the trial on any rank. Every rank gets the same answer, after the same batch."""
        if self.context.distributed.size == 1:
            return self.core.preempt.should_preempt() or self.context.get_stop_requested()
        return self._ranks_should_stop()

    def _ranks_should_stop(self) -> bool:
        """`_should_stop` with several ranks: they agree after every batch."""
        preempt = self.core.preempt._chief_should_preempt() if self.context.distributed.rank == 0 else False
        decisions = self.context.distributed.allgather((preempt, self.context.get_stop_requested()))
        return self._agree_on_stop(decisions[0][0], (requested for _, requested in decisions))

    def _stop_requested_anywhere(self) -> bool:
        """Whether the trial asked to stop, on any rank (every rank gets the same answer)."""
        if self.context.distributed.size == 1:
            return self.context.get_stop_requested()
        return self._agree_on_stop(False, self.context.distributed.allgather(self.context.get_stop_requested()))

    def _agree_on_stop(self, chief_preempts: Any, requested: Iterable[bool]) -> bool:
        """Adopt a stop any rank requested; True when the chief was preempted or a stop is requested."""
        if any(requested) and not self.context.get_stop_requested():
            self.context.set_stop_requested(True)
        return bool(chief_preempts) or self.context.get_stop_requested()

    def _stop(self) -> bool:
        """Checkpoint what is unsaved and tell the master why the trial stops; always False."""
        if self.steps_completed > self._last_checkpoint:
            self._checkpoint()
        if self.context.get_stop_requested():
            self._logger.info("the trial asked to stop after %d batches; checkpointed, exiting", self.steps_completed)
            self.core.train.report_early_exit("USER_REQUESTED_STOP")
        else:
            self._logger.info("preempted after %d batches; checkpointed, exiting", self.steps_completed)
        return False

    # -- periods, policy, searcher metric ------------------------------------------------------------

    def _report_due(self) -> bool:
        if self._schedule is not None:
            return self._unreported_batches() > 0 and self._schedule.reporting.fires(self.steps_completed)
        return self._unreported_batches() >= self._scheduling_unit

    def _validation_due(self) -> bool:
        if self._schedule is not None:
            period = self._schedule.validation
            return period is not None and self._last_validation != self.steps_completed and period.fires(
                self.steps_completed)
        period = self._min_validation_period
        return period > 0 and self.steps_completed - (self._last_validation or 0) >= period

    def _checkpoint_due(self) -> bool:
        if self._schedule is not None:
            period = self._schedule.checkpoint
            return period is not None and self._last_checkpoint != self.steps_completed and period.fires(
                self.steps_completed)
        period = self._min_checkpoint_period
        return period > 0 and self.steps_completed - self._last_checkpoint >= period

    def _quiet_until(self, op: core.SearcherOperation) -> int:
        """The first count of batches at which `_after_batch` may have more to do than look for a stop: the end of
        `op`, the next report, validation or checkpoint. With several ranks every batch (they agree on stops after
        each one), and where a period cannot tell when it fires next."""
        steps = self.steps_completed
        if self.context.distributed.size > 1:
            return steps + 1
        until = op._batches
        if self._schedule is not None:
            for period in (self._schedule.reporting, self._schedule.validation, self._schedule.checkpoint):
                nxt = period.next_firing(steps) if period is not None else NEVER
                if nxt is None:
                    return steps + 1
                until = min(until, nxt)
            return max(until, steps + 1)
        until = min(until, steps + self._scheduling_unit - self._unreported_batches())
        if self._min_validation_period > 0:
            until = min(until, (self._last_validation or 0) + self._min_validation_period)
        if self._min_checkpoint_period > 0:
            until = min(until, self._last_checkpoint + self._min_checkpoint_period)
        return max(until, steps + 1)

    def _validate_and_maybe_checkpoint(self) -> None:
        self._validate()
        if self.steps_completed <= self._last_checkpoint:
            return
        policy = self._checkpoint_policy
        best = self.core.train.last_validation_was_best
        if self._broadcast_validation_was_best and self.context.distributed.size > 1:
            best = self.context.distributed.broadcast(best)  # only the chief hears it from the master
        if policy == "all" or (policy == "best" and best):
            self._checkpoint()

    def _needs_searcher_metric(self) -> bool:
        """Whether validations must hold the searcher metric: always for a config's trial; for the Trainer API
        only when its config names one (a local fit() without a config has none)."""
        return self._schedule is None or self._searcher_metric is not None

    def _searcher_metric_value(self, metrics: Dict[str, Any]) -> Any:
        name = self._searcher_metric
        if name is None:
            raise errors.DeterminedError("the experiment config has no searcher.metric to report to the searcher")
        if name not in metrics:
            raise errors.InvalidTrialError(self._missing_searcher_metric(name, metrics))
        return metrics[name]

    def _validated(self, metrics: Dict[str, Any]) -> None:
        """Report the validation metrics, check for the searcher metric, and record them. The report goes first:
        without the searcher metric, the master learns the names the trial does report, ends the search with
        that reason at once, and restarts no trial (the check then fails this process with the same reason)."""
        self.core.train.report_validation_metrics(self.steps_completed, metrics)
        if self._needs_searcher_metric():
            self._searcher_metric_value(metrics)
        self._last_validation = self.steps_completed
        self._last_validation_metrics = metrics

    def _checkpoint_metadata(self, framework: str, checkpoint_format: str) -> Dict[str, Any]:
        """The metadata a checkpoint at `steps_completed` is recorded with."""
        return {"steps_completed": self.steps_completed, "framework": framework, "format": checkpoint_format}

    def _resume_at_platform_steps(self, state: Optional[Dict[str, Any]]) -> bool:
        """After restoring a checkpoint whose trial state is `state` (None: it keeps none), continue where
        the platform says this trial stands: a warm start from another experiment's checkpoint begins at
        batch 0, a restart or a PBT clone at the batch of the checkpoint. True when the checkpoint is the
        trial's own at that batch (not a warm start): only then does its last validation still count."""
        self.steps_completed = int(self.core.info.steps_completed)
        self._last_checkpoint = self.steps_completed
        own_checkpoint = state is not None and int(state.get("steps_completed", -1)) == self.steps_completed
        self._last_validation = state.get("last_validation") if state is not None and own_checkpoint else None
        return own_checkpoint


class BatchLoop(TrialLoop):
    """A TrialLoop that drives the training itself, one `_train_one_batch()` call per batch (the
    Estimator's training drives itself instead, and calls `_after_batch` from a hook)."""

    @abc.abstractmethod
    def _train_one_batch(self) -> None:
        """Train one batch, add 1 to `steps_completed` and keep its training metrics for the next report."""

    def _run_operations(self) -> bool:
        """Work through every searcher operation; False when the trial stopped (preempted or stop requested)."""
        for op in self.core.searcher.operations():
            if not self._run_operation(op):
                return False
        return True

    def _run_operation(self, op: core.SearcherOperation) -> bool:
        """Work through one searcher operation; False when the trial must stop.

        Between two batches at which something is due (a report, a validation, a checkpoint, the end of the
        operation) the loop only looks whether the trial asked to stop or knows it is preempted, and asks the
        master every QUIET_LOOK_S seconds: the per-batch cost of the platform stays a few attribute reads."""
        self._maybe_validate_initially()
        context, preempt = self.context, self.core.preempt
        quiet_until = self.steps_completed + 1
        look_at = time.monotonic() + QUIET_LOOK_S
        total = op._batches
        while self.steps_completed < total:
            self._train_one_batch()
            # preempted already known (an earlier answer of the master, or SIGTERM): read without asking
            if (self.steps_completed < quiet_until and not context._stop_requested and not preempt._preempted
                    and not preempt._sigterm and time.monotonic() < look_at):
                continue
            if not self._after_batch(op):
                return False
            quiet_until = self._quiet_until(op)
            look_at = time.monotonic() + QUIET_LOOK_S
        self._complete(op)
        if self._stop_requested_anywhere():
            return self._stop()
        return True


class HookLoop(TrialLoop):
    """A TrialLoop for a framework whose own training loop runs the batches (tf.estimator, Tensorpack): a hook in
    that loop calls `_before_first_batch()` once and `_batch_trained()` after every batch; both return False when
    the training must stop (no searcher operation left, preempted, or a stop requested)."""

    def __init__(self, trial_class: Type[Any], context: TrialContext) -> None:
        super().__init__(trial_class, context)
        self._ops: Optional[Iterator[core.SearcherOperation]] = None
        self._op: Optional[core.SearcherOperation] = None

    def _start_operations(self) -> bool:
        """Take the first searcher operation; False when there is none (nothing to train)."""
        self._ops = iter(self.core.searcher.operations())
        self._op = next(self._ops, None)
        return self._op is not None

    def _end_operations(self) -> None:
        self._ops = None

    def _before_first_batch(self) -> bool:
        """Finish the operations that need no training; False when none is left."""
        self._maybe_validate_initially()
        return self._advance()

    def _batch_trained(self) -> bool:
        """Count the batch just trained and do what is due after it; False when training must stop."""
        op = self._op
        assert op is not None
        self.steps_completed += 1
        return self._after_batch(op) and self._advance()

    def _advance(self) -> bool:
        """Complete the current operation while it is reached and move to the next; False when none is left."""
        while self._op is not None and self.steps_completed >= self._op._batches:
            self._complete(self._op)
            assert self._ops is not None
            self._op = next(self._ops, None)
        return self._op is not None
