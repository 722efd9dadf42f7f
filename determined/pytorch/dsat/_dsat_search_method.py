"""The search methods of DeepSpeed Autotune: `SearchMethod`s (the custom search API of determined.searcher) that
first run a profiling trial, then short trials over DeepSpeed configs (ZeRO stage and its settings, micro batch
size), each reporting DeepSpeed's own speed measurements, and keep the best config.

A `DSATTrial` is one trial to run (its hyperparameters, the DeepSpeed config they make, its result); trials of one
binary search over the micro batch size form a lineage (parent and children). `DSATTrialTracker` holds every trial,
the queue of those still to run, and the limits (`max_trials`, `max_concurrent_trials`, `max_slots`).
`BaseDSATSearchMethod` turns the runner's events into operations; the subclasses decide which trials follow a
result (`get_trials_after_validation_completed`) or a failure (`get_trials_after_early_exit`).
"""
import abc
import argparse
import collections
import copy
import dataclasses
import json
import logging
import pathlib
import pickle
import random
import uuid
from typing import Any, Deque, Dict, Iterable, Iterator, List, Optional, Set, Tuple, Union

import numpy as np

from determined.pytorch.dsat import _defaults, _utils
from determined.searcher._custom_search_method import SearcherState, SearchMethod
from determined.searcher._method import ExitedReason
from determined.searcher._ops import Close, Create, Operation, Shutdown, ValidateAfter
from determined.util import merge_dicts

logger = logging.getLogger("determined.pytorch.dsat")

Metric = Union[float, Dict[str, Any]]


@dataclasses.dataclass
class DSATSearchData:
    """The bounds of a binary search over `train_micro_batch_size_per_gpu`."""

    lo: int
    hi: int


@dataclasses.dataclass
class ASHADSATSearchData(DSATSearchData):
    """A binary search's bounds and the ASHA rung its lineage is in."""

    curr_rung: int = 0


def _ds_config(hparams: Dict[str, Any], model_dir: str) -> Dict[str, Any]:
    """The DeepSpeed config of `hparams`: its JSON file in the model dir, else in the working directory."""
    if (pathlib.Path(model_dir) / hparams[_defaults.CONFIG_KEY]).exists():
        return _utils.get_ds_config_from_hparams(hparams, model_dir)
    return _utils.get_ds_config_from_hparams(hparams)


class DSATTrial:
    """One trial of the search: its hyperparameters (the DeepSpeed config is the file of `deepspeed_config` with
    `overwrite_deepspeed_args` merged in), its length, its place in a lineage, and its result once reported."""

    def __init__(self, hparams: Dict[str, Any], model_dir: str, slots_per_trial: int, length: int,
                 request_id: Optional[uuid.UUID] = None, parent: Optional["DSATTrial"] = None,
                 search_data: Optional[DSATSearchData] = None, searcher_metric_name: Optional[str] = None) -> None:
        self.hparams = hparams
        self.model_dir = model_dir
        self.slots_per_trial = slots_per_trial
        self.length = length
        self.request_id = request_id or uuid.uuid4()
        self.parent = parent
        self.search_data = search_data
        self.searcher_metric_name = searcher_metric_name
        self.metric: Metric = {}
        self.error = False
        self.running = False
        self.children: Set["DSATTrial"] = set()
        if parent is not None:
            parent.children.add(self)
        self.lineage_root: DSATTrial = self if parent is None else parent.lineage_root
        self.ds_config = _ds_config(hparams, model_dir)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(request_id={self.request_id}, stage={self.stage}, "
                f"mbs={self.ds_config.get('train_micro_batch_size_per_gpu')}, error={self.error})")

    @property
    def completed(self) -> bool:
        return bool(self.error or self.metric)

    @property
    def lineage_set(self) -> Set["DSATTrial"]:
        """Every trial of this trial's lineage (its root and all descendants)."""
        found = {self.lineage_root}
        todo = list(self.lineage_root.children)
        while todo:
            trial = todo.pop()
            found.add(trial)
            todo.extend(trial.children)
        return found

    @property
    def num_completed_trials_in_lineage(self) -> int:
        return sum(t.completed for t in self.lineage_set)

    @property
    def error_in_direct_history(self) -> bool:
        trial: Optional[DSATTrial] = self
        while trial is not None:
            if trial.error:
                return True
            trial = trial.parent
        return False

    @property
    def mbs_in_lineage(self) -> Set[int]:
        return {t.mbs for t in self.lineage_set}

    @property
    def stage(self) -> int:
        return int((self.ds_config.get("zero_optimization") or {}).get("stage", 0))

    @property
    def fp16(self) -> bool:
        return bool((self.ds_config.get("fp16") or {}).get("enabled"))

    @property
    def mbs(self) -> int:
        mbs = self.ds_config.get("train_micro_batch_size_per_gpu")
        if not isinstance(mbs, int) or isinstance(mbs, bool):
            raise ValueError("a DeepSpeed Autotune trial needs an int train_micro_batch_size_per_gpu in its "
                             f"DeepSpeed config, got {mbs!r}")
        return mbs

    @property
    def create_and_val_ops(self) -> List[Operation]:
        """The operations that start this trial and train it to its length."""
        rid = str(self.request_id)
        return [Create(rid, self.hparams), ValidateAfter(rid, self.length)]

    @property
    def searcher_metric_val(self) -> Optional[float]:
        if self.searcher_metric_name is None:
            return None
        if isinstance(self.metric, (int, float)):
            return float(self.metric)
        value = self.metric.get(self.searcher_metric_name)
        return None if value is None else float(value)


class DSATModelProfileInfoTrial(DSATTrial):
    """The first trial: one micro batch per slot, from which DeepSpeed measures the model's size and activation
    memory (and the platform adds the memory of a slot)."""


class DSATTrialTracker:
    """Every trial of the search, the queue of those to run, and the limits of the command line."""

    def __init__(self, args: argparse.Namespace, exp_config: Dict[str, Any]) -> None:
        self.exp_config = exp_config
        self.max_trials: int = args.max_trials
        self.max_concurrent_trials: int = args.max_concurrent_trials
        self.max_slots: Optional[int] = args.max_slots
        self.model_dir: str = args.model_dir
        self.searcher_metric: str = args.metric
        self.start_profile_step: int = args.start_profile_step
        self.end_profile_step: int = args.end_profile_step
        self.zero_stages: Set[int] = set(args.zero_stages)
        self.slots_per_trial: int = int((exp_config.get("resources") or {}).get("slots_per_trial") or 1)
        self.hparams: Dict[str, Any] = exp_config["hyperparameters"]
        self.smaller_is_better = _utils.smaller_is_better(self.searcher_metric)
        self.model_profile_info_trial: Optional[DSATModelProfileInfoTrial] = None
        self.num_trials_since_best_result = 0
        self.successful_stages: Set[int] = set()
        self._all_trials_dict: Dict[uuid.UUID, DSATTrial] = {}
        self.queue: Deque[DSATTrial] = collections.deque()
        self._mem_per_gpu_per_stage: Optional[Dict[int, int]] = None
        self._approx_max_mbs_per_stage: Optional[Dict[int, int]] = None

    def __len__(self) -> int:
        return len(self._all_trials_dict)

    def __getitem__(self, request_id: Union[uuid.UUID, str]) -> DSATTrial:
        return self._all_trials_dict[uuid.UUID(str(request_id))]

    def __iter__(self) -> Iterator[Tuple[uuid.UUID, DSATTrial]]:
        return iter(self._all_trials_dict.items())

    def __contains__(self, item: Union[uuid.UUID, DSATTrial]) -> bool:
        if isinstance(item, uuid.UUID):
            return item in self._all_trials_dict
        if isinstance(item, DSATTrial):
            return item in self._all_trials_dict.values()
        raise ValueError(f"expected a uuid.UUID or a DSATTrial, got a {type(item).__name__}")

    # -- making trials -------------------------------------------------------------------------------

    def create_trial(self, hparams: Dict[str, Any], search_data: Optional[DSATSearchData] = None,
                     parent_trial: Optional[DSATTrial] = None) -> DSATTrial:
        """A trial of `hparams` (its batch sizes made consistent) that runs to DeepSpeed's end of profiling."""
        self.enforce_consistent_batch_config(hparams)
        # DeepSpeed's engine exits in the step whose global step is end_profile_step + 1.
        return DSATTrial(hparams=hparams, model_dir=self.model_dir, slots_per_trial=self.slots_per_trial,
                         length=self.end_profile_step + 1, parent=parent_trial, search_data=search_data,
                         searcher_metric_name=self.searcher_metric)

    def create_model_profile_info_trial(self) -> DSATModelProfileInfoTrial:
        hparams = copy.deepcopy(self.hparams)
        hparams[_defaults.OVERWRITE_KEY] = merge_dicts(hparams.get(_defaults.OVERWRITE_KEY) or {},
                                                       _defaults.MODEL_INFO_PROFILE_DS_CONFIG)
        self.enforce_consistent_batch_config(hparams)
        trial = DSATModelProfileInfoTrial(hparams=hparams, model_dir=self.model_dir,
                                          slots_per_trial=self.slots_per_trial, length=1)
        self.model_profile_info_trial = trial
        return trial

    def queue_and_register_trial(self, trial: DSATTrial) -> None:
        for other in self.completed_trials:
            if trial.hparams == other.hparams:
                logger.warning("queueing a trial identical to %s", other.request_id)
        self._all_trials_dict[trial.request_id] = trial
        self.queue.append(trial)

    def enforce_consistent_batch_config(self, hparams: Dict[str, Any]) -> None:
        """Set `train_batch_size` and `gradient_accumulation_steps` in `hparams`' overwrites to match the micro batch
        size and the slots (in place)."""
        batch = _utils.get_batch_config_from_mbs_gas_and_slots(_ds_config(hparams, self.model_dir),
                                                               slots=self.slots_per_trial)
        hparams[_defaults.OVERWRITE_KEY] = merge_dicts(hparams.get(_defaults.OVERWRITE_KEY) or {}, batch)

    # -- results -------------------------------------------------------------------------------------

    def update_trial_metric(self, trial: DSATTrial, metric: Metric) -> None:
        trial.metric = metric
        trial.running = False
        if not isinstance(trial, DSATModelProfileInfoTrial):
            self.successful_stages.add(trial.stage)
            if self.best_trial is trial:
                self.num_trials_since_best_result = 0
            else:
                self.num_trials_since_best_result += 1

    def report_trial_early_exit(self, trial: DSATTrial) -> None:
        if self.best_trial is not None:
            self.num_trials_since_best_result += 1
        trial.error = True
        trial.running = False

    def _profile_value(self, name: str) -> int:
        trial = self.model_profile_info_trial
        if trial is None or not isinstance(trial.metric, dict):
            raise RuntimeError(f"the model profiling trial must report before its {name!r} is used")
        value = trial.metric.get(name)
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise RuntimeError(f"the model profiling trial reported no number {name!r}: {trial.metric}")
        return int(value)

    @property
    def gpu_mem(self) -> int:
        """The memory of one slot in bytes (a GPU's; on CPU slots the machine's share of one slot)."""
        return self._profile_value("gpu_mem")

    @property
    def num_params(self) -> int:
        return self._profile_value("num_params")

    @property
    def trainable_num_params(self) -> int:
        return self._profile_value("trainable_num_params")

    @property
    def activation_mem_per_gpu(self) -> int:
        """Activation memory of one micro batch of 1 (at least 1 byte: a CPU's measure can be 0)."""
        return max(1, self._profile_value("activation_mem_per_gpu"))

    @property
    def mem_per_gpu_per_stage(self) -> Dict[int, int]:
        """Memory per slot at micro batch size 1, per ZeRO stage (Adam's states, fp16 or fp32 weights)."""
        if self._mem_per_gpu_per_stage is None:
            assert self.model_profile_info_trial is not None
            fp16 = self.model_profile_info_trial.fp16
            slots = max(1, self.slots_per_trial)
            params = self.num_params * (2 if fp16 else 4)
            grads = self.trainable_num_params * 4  # fp32 in the end, with or without mixed precision
            optimizer = self.trainable_num_params * ((4 if fp16 else 0) + 4 + 4)  # master weights, momentum, var
            non_activation = {
                0: params + grads + optimizer,
                1: params + grads + optimizer // slots,
                2: params + (grads + optimizer) // slots,
                3: (params + grads + optimizer) // slots,
            }
            self._mem_per_gpu_per_stage = {s: m + self.activation_mem_per_gpu for s, m in non_activation.items()}
        return self._mem_per_gpu_per_stage

    @property
    def approx_max_mbs_per_stage(self) -> Dict[int, int]:
        """The largest micro batch size per stage that the memory of a slot should hold."""
        if self._approx_max_mbs_per_stage is None:
            self._approx_max_mbs_per_stage = {
                stage: max((self.gpu_mem - mem) // self.activation_mem_per_gpu, 1)
                for stage, mem in self.mem_per_gpu_per_stage.items()
            }
        return self._approx_max_mbs_per_stage

    def _best_trial_fn(self, trials: Iterable[DSATTrial]) -> Optional[DSATTrial]:
        scored = [t for t in trials
                  if not isinstance(t, DSATModelProfileInfoTrial) and t.searcher_metric_val is not None]
        if not scored:
            return None
        pick = min if self.smaller_is_better else max
        return pick(scored, key=lambda t: t.searcher_metric_val)  # type: ignore[arg-type,return-value]

    @property
    def best_trials_by_stage(self) -> Dict[int, Optional[DSATTrial]]:
        return {stage: self._best_trial_fn(t for _, t in self if t.stage == stage) for stage in range(4)}

    @property
    def best_trial(self) -> Optional[DSATTrial]:
        return self._best_trial_fn(t for t in self.best_trials_by_stage.values() if t is not None)

    @property
    def running_trials(self) -> List[DSATTrial]:
        return [t for _, t in self if t.running]

    @property
    def completed_trials(self) -> List[DSATTrial]:
        return [t for _, t in self if t.completed]

    @property
    def num_running_trials(self) -> int:
        return len(self.running_trials)

    @property
    def num_completed_trials(self) -> int:
        return len(self.completed_trials)

    @property
    def max_trials_queued(self) -> bool:
        return len(self.queue) >= self.max_trials

    @property
    def max_trials_are_running_or_closed(self) -> bool:
        return self.num_running_trials + self.num_completed_trials >= self.max_trials

    @property
    def should_be_failure(self) -> bool:
        """The search failed: the profiling trial failed, or every autotuning trial did."""
        profile = self.model_profile_info_trial
        if profile is not None and profile.error:
            return True
        return all(t.error for _, t in self if t.completed and not isinstance(t, DSATModelProfileInfoTrial))

    @property
    def can_run_more_trials(self) -> bool:
        if not self.queue or self.max_trials_are_running_or_closed:
            return False
        if self.num_running_trials >= self.max_concurrent_trials:
            return False
        if self.max_slots is not None:
            free = self.max_slots - self.num_running_trials * self.slots_per_trial
            return free // max(1, self.slots_per_trial) > 0
        return True


class BaseDSATSearchMethod(SearchMethod):
    """The events of a DeepSpeed Autotune search. Subclasses return the trials that follow a result
    (`get_trials_after_validation_completed`) or a failure (`get_trials_after_early_exit`); they are queued and
    started, as `max_trials`, `max_concurrent_trials` and `max_slots` allow, when a trial closes. Every trial is
    closed after its one validation. The search ends after `max_trials` trials, when the profiling trial fails,
    or when `early_stopping_triggered()`."""

    def __init__(self, args: argparse.Namespace, exp_config: Dict[str, Any]) -> None:
        self.args = args
        self.exp_config = exp_config
        self.trial_tracker = DSATTrialTracker(args=args, exp_config=exp_config)
        self.rng = np.random.default_rng(seed=args.random_seed)
        self.random = random.Random(args.random_seed)

    @abc.abstractmethod
    def get_trials_after_validation_completed(self, searcher_state: SearcherState, last_trial: DSATTrial,
                                              metric: Metric) -> Iterable[DSATTrial]:
        """The trials to queue (in order) after `last_trial` reported `metric`."""

    @abc.abstractmethod
    def get_trials_after_early_exit(self, searcher_state: SearcherState, last_trial: DSATTrial,
                                    exited_reason: ExitedReason) -> Iterable[DSATTrial]:
        """The trials to queue (in order) after `last_trial` failed (for instance out of memory)."""

    def choose_next_trial_from_queue(self) -> DSATTrial:
        """The next trial to start (first in, first out)."""
        return self.trial_tracker.queue.popleft()

    # The share of the estimated largest micro batch a new config searches up to (binary and ASHA set it).
    search_range_factor: float = 1.0

    def _random_zero_stage(self) -> int:
        return self.random.choice(sorted(self.trial_tracker.zero_stages))

    def _search_data(self, hi: int) -> DSATSearchData:
        """The search state of a new config whose micro batch size is searched in [1, hi]."""
        return DSATSearchData(lo=1, hi=hi)

    def get_random_hparams_and_search_data(self, zero_stage: int) -> Tuple[Dict[str, Any], DSATSearchData]:
        """A config at `zero_stage` whose micro batch size starts in the middle of its search range."""
        hparams = self._hparams_with_zero_config(zero_stage)
        hi = max(1, int(self.search_range_factor * self.trial_tracker.approx_max_mbs_per_stage[zero_stage]))
        data = self._search_data(hi)
        hparams[_defaults.OVERWRITE_KEY]["train_micro_batch_size_per_gpu"] = (data.lo + data.hi) // 2
        return hparams, data

    def get_random_trial(self) -> DSATTrial:
        hparams, data = self.get_random_hparams_and_search_data(self._random_zero_stage())
        return self.trial_tracker.create_trial(hparams=hparams, search_data=data)

    def early_stopping_triggered(self) -> bool:
        """Whether the search should end early (never, unless a subclass says so)."""
        return False

    # -- the events ----------------------------------------------------------------------------------

    def initial_operations(self, searcher_state: SearcherState) -> List[Operation]:
        trial = self.trial_tracker.create_model_profile_info_trial()
        self.trial_tracker.queue_and_register_trial(trial)
        self.trial_tracker.queue.popleft()
        trial.running = True
        return trial.create_and_val_ops

    def on_trial_created(self, searcher_state: SearcherState, request_id: Any) -> List[Operation]:
        return []

    def on_validation_completed(self, searcher_state: SearcherState, request_id: Any, metric: Any,
                                train_length: int) -> List[Operation]:
        trial = self.trial_tracker[request_id]
        self.trial_tracker.update_trial_metric(trial, metric)
        if isinstance(trial, DSATModelProfileInfoTrial):
            logger.info("approximate largest micro batch per ZeRO stage: %s",
                        self.trial_tracker.approx_max_mbs_per_stage)
            logger.info("approximate memory per slot per ZeRO stage: %s", self.trial_tracker.mem_per_gpu_per_stage)
            logger.info("memory of a slot: %s", self.trial_tracker.gpu_mem)
        if not self.trial_tracker.max_trials_queued and not self.should_shutdown():
            for new in self.get_trials_after_validation_completed(searcher_state, trial, metric):
                self.trial_tracker.queue_and_register_trial(new)
        return [Close(str(request_id))]

    def on_trial_exited_early(self, searcher_state: SearcherState, request_id: Any,
                              exited_reason: ExitedReason) -> List[Operation]:
        trial = self.trial_tracker[request_id]
        self.trial_tracker.report_trial_early_exit(trial)
        ops: List[Operation] = []
        if exited_reason != ExitedReason.ERRORED:
            # Invalid hyperparameters or a user's cancel: the search stops.
            logger.info("Shutting down: trial %s exited early (%s)", request_id, exited_reason.value)
            return [Shutdown(failure=self.trial_tracker.should_be_failure)]
        # An error is most often the config not fitting in memory: the search goes on around it.
        if not self.trial_tracker.max_trials_queued and not self.should_shutdown():
            for new in self.get_trials_after_early_exit(searcher_state, trial, exited_reason):
                self.trial_tracker.queue_and_register_trial(new)
        return ops

    def on_trial_closed(self, searcher_state: SearcherState, request_id: Any) -> List[Operation]:
        if self.should_shutdown():
            return [Shutdown(failure=self.trial_tracker.should_be_failure)]
        ops: List[Operation] = []
        while self.trial_tracker.can_run_more_trials:
            trial = self.choose_next_trial_from_queue()
            trial.running = True
            ops.extend(trial.create_and_val_ops)
        if not ops and not self.trial_tracker.running_trials:
            logger.info("Shutting down: no trial left to run")
            return [Shutdown(failure=self.trial_tracker.should_be_failure)]
        return ops

    def progress(self, searcher_state: SearcherState) -> float:
        return min(1.0, len(searcher_state.trials_closed) / max(1, self.trial_tracker.max_trials))

    def should_shutdown(self) -> bool:
        """Whether the search is over (the reason is logged once)."""
        reason = self._shutdown_reason()
        if reason is not None and reason != getattr(self, "_logged_reason", None):
            logger.info("Shutting down: %s", reason)
            self._logged_reason = reason
        return reason is not None

    def _shutdown_reason(self) -> Optional[str]:
        profile = self.trial_tracker.model_profile_info_trial
        if profile is not None and profile.error:
            return ("the model profiling trial failed (see its logs); the config must run with "
                    "train_micro_batch_size_per_gpu = 1")
        if self.early_stopping_triggered():
            return "early stopping criteria met"
        if self.trial_tracker.num_completed_trials >= self.trial_tracker.max_trials:
            return "all trials completed"
        return None

    # -- the best config -----------------------------------------------------------------------------

    def best_ds_config(self) -> Optional[Dict[str, Any]]:
        """The DeepSpeed config of the best trial so far, without its autotuning section (None before one)."""
        best = self.trial_tracker.best_trial
        if best is None:
            return None
        config = copy.deepcopy(best.ds_config)
        config.pop("autotuning", None)
        return config

    # -- state ---------------------------------------------------------------------------------------

    def save_method_state(self, path: pathlib.Path) -> None:
        with path.joinpath("trial_tracker.pkl").open("wb") as f:
            pickle.dump(self.trial_tracker, f)
        with path.joinpath("random_state.pkl").open("wb") as f:
            pickle.dump((self.random.getstate(), self.rng), f)
        best = self.trial_tracker.best_trial
        if best is not None:
            path.joinpath("best_ds_config.json").write_text(json.dumps(self.best_ds_config(), indent=2))
            path.joinpath("best_ds_metrics.json").write_text(json.dumps(best.metric, indent=2))

    def load_method_state(self, path: pathlib.Path) -> None:
        logger.info("Restoring the DeepSpeed Autotune search from %s", path)
        with path.joinpath("trial_tracker.pkl").open("rb") as f:
            self.trial_tracker = pickle.load(f)
        with path.joinpath("random_state.pkl").open("rb") as f:
            state, self.rng = pickle.load(f)
        self.random.setstate(state)

    # -- shared by the subclasses --------------------------------------------------------------------

    def _hparams_with_zero_config(self, zero_stage: int) -> Dict[str, Any]:
        hparams = copy.deepcopy(self.trial_tracker.hparams)
        zero = _utils.get_random_zero_optim_config(zero_stage, self.random)
        hparams[_defaults.OVERWRITE_KEY] = merge_dicts(hparams.get(_defaults.OVERWRITE_KEY) or {},
                                                       {"zero_optimization": zero})
        return hparams

    def _child_with_mbs(self, last_trial: DSATTrial, search_data: DSATSearchData, mbs: int) -> DSATTrial:
        hparams = copy.deepcopy(last_trial.hparams)
        hparams[_defaults.OVERWRITE_KEY]["train_micro_batch_size_per_gpu"] = mbs
        return self.trial_tracker.create_trial(hparams=hparams, search_data=search_data, parent_trial=last_trial)

    def _first_trials_count(self) -> int:
        count = min(self.args.max_concurrent_trials, self.trial_tracker.max_trials)
        if self.args.max_slots is not None:
            count = min(count, self.args.max_slots // max(1, self.trial_tracker.slots_per_trial))
        return max(1, count)


class RandomDSATSearchMethod(BaseDSATSearchMethod):
    """Random DeepSpeed configs, each with a randomized binary search over the micro batch size, stopped early by
    what other trials showed (a stage 1 or 2 success ends stage 3 searches; a lineage that cannot beat a larger
    batch already run ends). `trials_per_random_config`: the most trials per config; `early_stopping`: end the
    search after that many trials without a new best."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.trials_per_random_config: int = self.args.trials_per_random_config
        self.early_stopping: Optional[int] = self.args.early_stopping

    def get_trials_after_validation_completed(self, searcher_state: SearcherState, last_trial: DSATTrial,
                                              metric: Metric) -> List[DSATTrial]:
        if isinstance(last_trial, DSATModelProfileInfoTrial):
            return [self.get_random_trial() for _ in range(self._first_trials_count())]
        if last_trial.search_data is None or self.should_stop_lineage(last_trial):
            return [self.get_random_trial()]
        data = copy.deepcopy(last_trial.search_data)
        data.lo = last_trial.mbs + 1
        if data.lo > data.hi:  # the first ceiling was too low
            data.hi *= 2
        return [self._child_with_mbs(last_trial, data, self.get_random_mbs_from_search_data(data))]

    def get_trials_after_early_exit(self, searcher_state: SearcherState, last_trial: DSATTrial,
                                    exited_reason: ExitedReason) -> List[DSATTrial]:
        if last_trial.search_data is None:
            return []
        if self.should_stop_lineage(last_trial):
            return [self.get_random_trial()]
        data = copy.deepcopy(last_trial.search_data)
        data.hi = last_trial.mbs - 1
        return [self._child_with_mbs(last_trial, data, self.get_random_mbs_from_search_data(data))]

    def choose_next_trial_from_queue(self) -> DSATTrial:
        """The first queued trial whose lineage should go on (the others are replaced by random trials)."""
        trial = self.trial_tracker.queue.popleft()
        while self.should_stop_lineage(trial):
            self.trial_tracker.queue_and_register_trial(self.get_random_trial())
            trial = self.trial_tracker.queue.popleft()
        return trial

    def should_stop_lineage(self, trial: DSATTrial) -> bool:
        data = trial.search_data
        if data is None:
            return False
        failed_on_min_mbs = trial.error and trial.mbs <= data.lo
        too_many = trial.num_completed_trials_in_lineage >= self.trials_per_random_config
        # DeepSpeed knowledge: when stage 1 or 2 runs, stage 3 is not faster.
        stage_3_not_needed = trial.stage == 3 and bool({1, 2} & self.trial_tracker.successful_stages)
        beaten = trial.error_in_direct_history and any(
            other.mbs >= data.hi for _, other in self.trial_tracker
            if other.stage == trial.stage and other.searcher_metric_val is not None)
        return bool(failed_on_min_mbs or too_many or stage_3_not_needed or beaten)

    def get_random_mbs_from_search_data(self, search_data: DSATSearchData) -> int:
        """A micro batch size in [lo, hi], binomially distributed around the middle."""
        return int(search_data.lo + self.rng.binomial(max(0, search_data.hi - search_data.lo), 0.5))

    def get_random_hparams_and_search_data(self, zero_stage: int) -> Tuple[Dict[str, Any], DSATSearchData]:
        hparams = self._hparams_with_zero_config(zero_stage)
        best = self.trial_tracker.best_trials_by_stage[zero_stage]
        if best is not None and best.search_data is not None:
            # Start above the stage's best micro batch, up to the largest that ran.
            data = copy.deepcopy(best.search_data)
            data.lo = best.mbs + 1
            largest = max(t.mbs for t in self.trial_tracker.completed_trials
                          if t.stage == best.stage and t.searcher_metric_val is not None)
            data.hi = max(largest, data.hi, 2 * data.lo)
        else:
            data = DSATSearchData(lo=1, hi=self.trial_tracker.approx_max_mbs_per_stage[zero_stage])
        hparams[_defaults.OVERWRITE_KEY]["train_micro_batch_size_per_gpu"] = self.get_random_mbs_from_search_data(data)
        return hparams, data

    def _random_zero_stage(self) -> int:
        stages = ({1, 2} & self.trial_tracker.successful_stages) & self.trial_tracker.zero_stages
        return self.random.choice(sorted(stages or self.trial_tracker.zero_stages))

    def early_stopping_triggered(self) -> bool:
        if self.early_stopping is None:
            return False
        return self.trial_tracker.num_trials_since_best_result >= self.early_stopping


class BinarySearchDSATSearchMethod(BaseDSATSearchMethod):
    """As many random DeepSpeed configs as can run at once, each with a binary search over the micro batch size
    from 1 to the largest the memory should hold (times `search_range_factor`); a finished search is replaced by a
    new random config, until `max_trials`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.search_range_factor: float = float(self.args.search_range_factor)

    def get_trials_after_validation_completed(self, searcher_state: SearcherState, last_trial: DSATTrial,
                                              metric: Metric) -> List[DSATTrial]:
        if isinstance(last_trial, DSATModelProfileInfoTrial):
            return [self.get_random_trial() for _ in range(self._first_trials_count())]
        if last_trial.search_data is None:
            return [self.get_random_trial()]
        data = copy.deepcopy(last_trial.search_data)
        data.lo = last_trial.mbs + 1
        if data.lo > data.hi:
            return [self.get_random_trial()]
        return [self._child_with_mbs(last_trial, data, (data.lo + data.hi) // 2)]

    def get_trials_after_early_exit(self, searcher_state: SearcherState, last_trial: DSATTrial,
                                    exited_reason: ExitedReason) -> List[DSATTrial]:
        if last_trial.search_data is None:
            return [self.get_random_trial()]
        data = copy.deepcopy(last_trial.search_data)
        data.hi = last_trial.mbs - 1
        if data.lo > data.hi:
            return [self.get_random_trial()]
        return [self._child_with_mbs(last_trial, data, (data.lo + data.hi) // 2)]



class ASHADSATSearchMethod(BaseDSATSearchMethod):
    """ASHA (arxiv:1810.05934) over random DeepSpeed configs, the resource being the trials of each config's binary
    search over the micro batch size: rung r allows `min_binary_search_trials * divisor**(asha_early_stopping + r)`
    trials, and the best 1/`divisor` of a rung's lineages are promoted, up to `max_rungs`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.divisor = int(self.args.divisor)
        self.max_rungs = int(self.args.max_rungs)
        self.min_binary_search_trials = int(self.args.min_binary_search_trials)
        self.asha_early_stopping = int(self.args.asha_early_stopping)
        self.search_range_factor = float(self.args.search_range_factor)

    def get_trials_after_validation_completed(self, searcher_state: SearcherState, last_trial: DSATTrial,
                                              metric: Metric) -> List[DSATTrial]:
        if isinstance(last_trial, DSATModelProfileInfoTrial):
            return [self.get_random_trial() for _ in range(self._first_trials_count())]
        return [self.get_next_trial(last_trial)]

    def get_trials_after_early_exit(self, searcher_state: SearcherState, last_trial: DSATTrial,
                                    exited_reason: ExitedReason) -> List[DSATTrial]:
        if last_trial.search_data is None:
            return []
        return [self.get_next_trial(last_trial)]

    def choose_next_trial_from_queue(self) -> DSATTrial:
        """The queued trial in the highest rung; among those, the one with the most completed trials in its lineage."""
        queue = self.trial_tracker.queue
        top = max(self._rung(t) for t in queue)
        trial = max((t for t in queue if self._rung(t) == top), key=lambda t: t.num_completed_trials_in_lineage)
        queue.remove(trial)
        return trial

    @staticmethod
    def _rung(trial: DSATTrial) -> int:
        data = trial.search_data
        return data.curr_rung if isinstance(data, ASHADSATSearchData) else -1

    def get_next_trial(self, last_trial: DSATTrial) -> DSATTrial:
        next_trial = None
        if not self.lineage_completed_rung(last_trial, self._rung(last_trial)):
            next_trial = self.get_next_trial_in_lineage(last_trial)
        if next_trial is None:
            lineage = self.get_next_promotable_lineage()
            if lineage is not None:
                next_trial = self.get_next_trial_in_lineage(lineage)
                if next_trial is not None:
                    assert isinstance(next_trial.search_data, ASHADSATSearchData)
                    next_trial.search_data.curr_rung += 1
        return next_trial if next_trial is not None else self.get_random_trial()

    @property
    def rungs(self) -> Dict[int, List[DSATTrial]]:
        """Per rung, the latest trial of each lineage that completed it."""
        rungs: Dict[int, List[DSATTrial]] = collections.defaultdict(list)
        for latest in self.get_all_latest_trials_in_lineages():
            rung = 0
            while self.lineage_completed_rung(latest, rung):
                rungs[rung].append(latest)
                rung += 1
                if rung >= self.max_rungs:
                    break
        return rungs

    def get_all_latest_trials_in_lineages(self) -> List[DSATTrial]:
        return [t for _, t in self.trial_tracker
                if isinstance(t.search_data, ASHADSATSearchData) and not t.children]

    def lineage_completed_rung(self, trial: DSATTrial, rung_idx: int) -> bool:
        latest = self.get_latest_trial_in_lineage(trial)
        data = latest.search_data
        assert isinstance(data, ASHADSATSearchData)
        if data.curr_rung > rung_idx:
            return True
        if trial.num_completed_trials_in_lineage >= self.max_trials_for_rung_idx(rung_idx):
            return True
        if data.curr_rung == rung_idx:  # its binary search ended before using the rung's trials
            failed_on_min_mbs = latest.error and latest.mbs == data.lo
            if data.hi == data.lo or failed_on_min_mbs:
                return True
        return False

    def get_next_promotable_lineage(self) -> Optional[DSATTrial]:
        for rung in reversed(range(self.max_rungs - 1)):  # nothing is promoted from the top rung
            trial = self.get_next_promotable_lineage_in_rung(rung)
            if trial is not None:
                return trial
        return None

    def get_next_promotable_lineage_in_rung(self, rung_idx: int) -> Optional[DSATTrial]:
        for trial in self.get_top_lineages_in_rung(rung_idx):
            latest = self.get_latest_trial_in_lineage(trial)
            if self._rung(latest) <= rung_idx:
                return latest
        return None

    def get_top_lineages_in_rung(self, rung_idx: int) -> List[DSATTrial]:
        """The best trial of each of the best 1/divisor of the lineages that completed the rung."""
        lineages = self.rungs[rung_idx]
        k = len(lineages) // self.divisor
        if not k:
            return []
        best = [b for b in (self.get_best_trial_in_lineage(t, max_rung_idx=rung_idx) for t in lineages)
                if b is not None]
        best.sort(key=lambda t: t.searcher_metric_val or 0.0, reverse=not self.trial_tracker.smaller_is_better)
        return best[:k]

    def get_best_trial_in_lineage(self, trial: DSATTrial, max_rung_idx: Optional[int] = None) -> Optional[DSATTrial]:
        scored = [t for t in trial.lineage_set if t.searcher_metric_val is not None
                  and (max_rung_idx is None or self._rung(t) <= max_rung_idx)]
        if not scored:
            return None
        pick = min if self.trial_tracker.smaller_is_better else max
        return pick(scored, key=lambda t: t.searcher_metric_val)  # type: ignore[arg-type,return-value]

    @staticmethod
    def get_latest_trial_in_lineage(trial: DSATTrial) -> DSATTrial:
        while trial.children:
            trial = next(iter(trial.children))
        return trial

    def get_next_trial_in_lineage(self, trial: DSATTrial) -> Optional[DSATTrial]:
        """The next trial of the lineage's binary search (None when it is over)."""
        latest = self.get_latest_trial_in_lineage(trial)
        data = copy.deepcopy(latest.search_data)
        assert isinstance(data, ASHADSATSearchData)
        if latest.searcher_metric_val is not None:
            data.lo = latest.mbs + 1
        else:
            data.hi = latest.mbs - 1
        if data.hi < data.lo:
            return None
        return self._child_with_mbs(latest, data, (data.lo + data.hi) // 2)

    def max_trials_for_rung_idx(self, rung_idx: int) -> int:
        return self.min_binary_search_trials * self.divisor ** (self.asha_early_stopping + rung_idx)

    def _search_data(self, hi: int) -> DSATSearchData:
        return ASHADSATSearchData(lo=1, hi=hi, curr_rung=0)


class _TestDSATSearchMethod(BaseDSATSearchMethod):
    """For tests: after the profiling trial, micro batch sizes 2 to max_trials, each at a random given stage."""

    def get_trials_after_validation_completed(self, searcher_state: SearcherState, last_trial: DSATTrial,
                                              metric: Metric) -> List[DSATTrial]:
        if not isinstance(last_trial, DSATModelProfileInfoTrial):
            return []
        base = copy.deepcopy(last_trial.hparams)
        autotuning = base[_defaults.OVERWRITE_KEY]["autotuning"]
        autotuning.pop("model_info", None)
        autotuning.pop("model_info_path", None)
        trials = []
        for mbs in range(2, self.trial_tracker.max_trials + 1):
            hparams = copy.deepcopy(base)
            hparams[_defaults.OVERWRITE_KEY]["train_micro_batch_size_per_gpu"] = mbs
            hparams[_defaults.OVERWRITE_KEY]["zero_optimization"] = {
                "stage": self.random.choice(sorted(self.args.zero_stages))}
            trials.append(self.trial_tracker.create_trial(hparams=hparams))
        return trials

    def get_trials_after_early_exit(self, searcher_state: SearcherState, last_trial: DSATTrial,
                                    exited_reason: ExitedReason) -> List[DSATTrial]:
        return []
