"""`DetCallback`: a `transformers.Trainer` run as a trial (Determined 0.38's rules, docs/transformers.md).

The Trainer drives training; the callback reports its logs as metrics, uploads each checkpoint it saves, turns the
platform's preemption into `should_training_stop`, reports progress, and at start downloads the trial's latest
checkpoint into `output_dir` and points `args.resume_from_checkpoint` at it.
"""
import json
import logging
import os
from typing import Any, Dict, List, Optional, Tuple

import transformers
from transformers import trainer_utils

import determined as det
from determined import core

logger = logging.getLogger("determined.transformers")

# Keys of the Trainer's logs that are not metrics to keep: the rounded epoch (`epochs` replaces it) and speeds.
_DROPPED_KEY = "epoch"
_SPEED_SUFFIXES = ("_runtime", "_per_second", "_compilation_time")
TRAINING, VALIDATION, TEST = "training", "validation", "test"
USER_DATA_FILE = "my_data.json"


def metric_kind(logs: Dict[str, Any]) -> str:
    """`validation` for logs with an `eval_` key, `test` for logs with a `test_` key, else `training`."""
    if any(key.startswith("eval_") for key in logs):
        return VALIDATION
    if any(key.startswith("test_") for key in logs):
        return TEST
    return TRAINING


def training_length(args: transformers.TrainingArguments) -> Tuple[str, float, str]:
    """How long the Trainer trains: (unit, length, the argument that says so)."""
    if args.max_steps is not None and args.max_steps > 0:
        return "batches", args.max_steps, "--max_steps"
    return "epochs", args.num_train_epochs, "--num_train_epochs"


def _evaluates(args: transformers.TrainingArguments) -> bool:
    strategy = getattr(args, "eval_strategy", None) or getattr(args, "evaluation_strategy", None)
    return str(getattr(strategy, "value", strategy) or "no") != "no"


class DetCallback(transformers.TrainerCallback):
    """Connects a ``transformers.Trainer`` to the trial it runs in; pass it in ``Trainer(callbacks=[...])``.

    * ``core_context``: the script's ``det.core.init()`` context; ``args``: the Trainer's ``TrainingArguments``.
      When the trial has a latest checkpoint (a pause, a restart) and ``overwrite_output_dir`` is not set, it is
      downloaded into ``args.output_dir`` and ``args.resume_from_checkpoint`` names its newest ``checkpoint-N``:
      pass that to ``trainer.train(resume_from_checkpoint=...)``.
    * Logs become metrics at the Trainer's ``global_step``, with ``batches`` (the step) and ``epochs`` (the
      Trainer's fractional epoch): logs with an ``eval_`` key go to ``validation`` (they must hold
      ``searcher.metric`` and the ASHA ``time_metric``), logs with a ``test_`` key are not reported, the rest go
      to ``training``; each kind once per step. ``filter_metrics``: keep only the keys containing one of these
      names (the searcher's metrics are always kept). The rounded ``epoch`` and the speed figures are dropped.
    * Each checkpoint the Trainer saves (``checkpoint-N`` in ``output_dir``, with ``runs/``) is uploaded as the
      trial's checkpoint with ``steps_completed`` N; ``user_data`` is written into it as ``my_data.json``.
    * When the platform asks the trial to stop, training stops after the step; the last step is saved.
    * At the end of training a last evaluation and save run when the last step had none.
    * The searcher's length must agree with the Trainer's (``max_steps`` in batches, else
      ``num_train_epochs`` in epochs): an integer ``searcher.max_length`` or a different length is an error.
    """

    def __init__(
        self,
        core_context: core.Context,
        args: transformers.TrainingArguments,
        filter_metrics: Optional[List[str]] = None,
        user_data: Optional[Dict[str, Any]] = None,
    ) -> None:
        super().__init__()
        info = det.get_cluster_info()
        if info is None:
            raise RuntimeError(
                "det.transformers.DetCallback runs in a trial (an experiment's entrypoint, e.g. `python3 train.py`): "
                "det.get_cluster_info() is None in this process; train without the callback off the platform"
            )
        self.core_context = core_context
        self.info = info
        self.filter_metrics = list(filter_metrics) if filter_metrics else None
        self.user_data = user_data
        self.searcher_metric: Optional[str] = None
        self.time_metric: Optional[str] = None
        self._last_reported = {TRAINING: -1, VALIDATION: -1}
        self._last_save = -1
        self._last_percent = 0
        self._preempted = False
        self._resume(args)
        if info.task_type == "TRIAL":
            searcher = dict(info.trial._config.get("searcher") or {})
            self._check_length(searcher, args)
            self.searcher_metric = searcher.get("metric")
            self.time_metric = searcher.get("time_metric")
            if self.filter_metrics is not None:
                self.filter_metrics += [m for m in (self.searcher_metric, self.time_metric) if m]

    def _resume(self, args: transformers.TrainingArguments) -> None:
        uuid = self.info.latest_checkpoint
        if uuid is None:
            return
        if getattr(args, "overwrite_output_dir", False):
            logger.info("overwrite_output_dir is set: the trial's latest checkpoint %s is not downloaded", uuid)
            return
        self.core_context.checkpoint.download(uuid, args.output_dir)
        args.resume_from_checkpoint = trainer_utils.get_last_checkpoint(args.output_dir)
        logger.info("checkpoint %s downloaded: training resumes from %s", uuid, args.resume_from_checkpoint)

    def _check_length(self, searcher: Dict[str, Any], args: transformers.TrainingArguments) -> None:
        unit, length, argument = training_length(args)
        max_length = searcher.get("max_length")
        if isinstance(max_length, int) and not isinstance(max_length, bool):
            raise ValueError(
                f"searcher.max_length: {max_length} has no unit, and the Trainer's length is {argument} "
                f"({unit}={length}): remove searcher.max_length (deprecated in 0.38) and let {argument} decide"
            )
        if isinstance(max_length, dict) and max_length:
            [(search_unit, search_length)] = list(max_length.items())[:1]
            if (search_unit, search_length) != (unit, length):
                raise ValueError(
                    f"searcher.max_length ({search_unit}={search_length}) is not the Trainer's length {argument} "
                    f"({unit}={length}): make them agree, or remove searcher.max_length (deprecated in 0.38)"
                )
            return
        name = searcher.get("name")
        time_metric = searcher.get("time_metric")
        if name in ("adaptive_asha", "async_halving") and time_metric in ("batches", "epochs"):
            if (time_metric, searcher.get("max_time")) != (unit, length):
                raise ValueError(
                    f"searcher.time_metric/max_time ({time_metric}={searcher.get('max_time')}) of the {name} search "
                    f"is not the Trainer's length {argument} ({unit}={length}): change one to match the other"
                )

    def _metrics(self, logs: Dict[str, Any]) -> Dict[str, Any]:
        keep = self.filter_metrics
        metrics = {}
        for key, value in logs.items():
            if key == _DROPPED_KEY or key.endswith(_SPEED_SUFFIXES):
                continue
            if keep is not None and not any(name in key for name in keep):
                continue
            metrics[key] = value
        return metrics

    def _check_validation(self, metrics: Dict[str, Any]) -> None:
        missing = [f"{what} {name!r} ({field})" for what, name, field in (
            ("searcher metric", self.searcher_metric, "searcher.metric"),
            ("time metric", self.time_metric, "searcher.time_metric")) if name and name not in metrics]
        if missing:
            raise ValueError(
                f"the Trainer's evaluation logs lack the {' and the '.join(missing)}: the search needs them in every "
                f"evaluation (the logs have {sorted(metrics)}); name an eval_* key the Trainer logs in the config"
            )

    def on_log(self, args: transformers.TrainingArguments, state: transformers.TrainerState,
               control: transformers.TrainerControl, logs: Optional[Dict[str, Any]] = None, **kwargs: Any) -> None:
        kind = metric_kind(logs or {})
        step = state.global_step
        if logs and kind != TEST and self._last_reported[kind] != step:
            self._last_reported[kind] = step
            if state.is_world_process_zero:
                metrics = {"batches": step, "epochs": state.epoch, **self._metrics(logs)}
                if kind == VALIDATION:
                    self._check_validation(metrics)
                    self.core_context.train.report_validation_metrics(steps_completed=step, metrics=metrics)
                else:
                    self.core_context.train.report_training_metrics(steps_completed=step, metrics=metrics)
        # Every rank asks (the chief's answer is shared); the save at the end of training takes the checkpoint.
        if self.core_context.preempt.should_preempt():
            self._preempted = True
            control.should_training_stop = True

    def on_save(self, args: transformers.TrainingArguments, state: transformers.TrainerState,
                control: transformers.TrainerControl, **kwargs: Any) -> None:
        step = state.global_step
        self._last_save = step
        folder = f"{trainer_utils.PREFIX_CHECKPOINT_DIR}-{step}"
        if state.is_world_process_zero and self.user_data is not None:
            with open(os.path.join(args.output_dir, folder, USER_DATA_FILE), "w") as f:
                json.dump(self.user_data, f)
        metadata: Dict[str, Any] = {"steps_completed": step}
        if self.info.task_type == "TRIAL":
            metadata["trial_id"] = self.info.trial.trial_id

        def selector(path: str) -> bool:
            return path.startswith((f"{folder}/", "runs/"))

        self.core_context.checkpoint.upload(args.output_dir, metadata, shard=True, selector=selector)

    def on_step_end(self, args: transformers.TrainingArguments, state: transformers.TrainerState,
                    control: transformers.TrainerControl, **kwargs: Any) -> None:
        if state.is_world_process_zero and args.max_steps > 0:
            progress = min(1.0, state.global_step / args.max_steps)
            if int(progress * 100) > self._last_percent:  # at most one report per percent
                self._last_percent = int(progress * 100)
                self.core_context.train.report_progress(progress)

    def on_epoch_end(self, args: transformers.TrainingArguments, state: transformers.TrainerState,
                     control: transformers.TrainerControl, **kwargs: Any) -> None:
        unit, length, _ = training_length(args)
        done = state.global_step >= length if unit == "batches" else (state.epoch or 0) >= length
        if control.should_training_stop or done:
            step = state.global_step
            if step > self._last_reported[VALIDATION] and not self._preempted and _evaluates(args):
                control.should_evaluate = True
            if step > self._last_save:
                control.should_save = True
        if state.is_world_process_zero and unit == "epochs" and length:
            self.core_context.train.report_progress(min(1.0, (state.epoch or 0) / length))
