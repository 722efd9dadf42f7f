"""DeepSpeed Autotune's search methods (binary, random, asha), driven event by event as the runner drives them,
against a simulated cluster: a profiling trial that reports the model's memory, trials whose speed grows with the
micro batch size and that fail as out of memory above a limit. Every config tried is inside the search space, a
failing config is followed by a smaller micro batch, the search ends within max_trials, and the best config is the
fastest that ran. Also: the experiment config of the autotuning trials, and the user-code helpers."""
import argparse
import json
import pathlib
import uuid
from typing import Any, Dict, List, Optional, Tuple

import pytest
import yaml

pytest.importorskip("deepspeed")

from determined.pytorch import dsat  # noqa: E402
from determined.pytorch.dsat import _defaults, _run_dsat, _utils  # noqa: E402
from determined.pytorch.dsat._cli import get_full_parser  # noqa: E402
from determined.searcher import Close, Create, ExitedReason, Shutdown, ValidateAfter  # noqa: E402
from determined.searcher._custom_search_method import SearcherState  # noqa: E402

MODEL = pathlib.Path(__file__).resolve().parent / "_dsat_model"
GIB = 2**30
OOM_ABOVE = 700  # micro batches larger than this fail
PROFILE = {"num_params": 10_000_000, "trainable_num_params": 10_000_000, "activation_mem_per_gpu": 10 * 2**20,
           "gpu_mem": 16 * GIB}


def _args(method: str, *extra: str) -> argparse.Namespace:
    args = get_full_parser().parse_args([method, str(MODEL / "dsat.yaml"), str(MODEL), *extra])
    args.model_dir = str(MODEL)
    return args


def _speed(mbs: int, stage: int) -> Dict[str, float]:
    """Throughput grows with the micro batch and is a little better at stage 1 than 2 (a made-up but fixed law)."""
    throughput = mbs * (1.0 if stage == 1 else 0.9) / (1 + mbs / 2000)
    return {"throughput": throughput, "FLOPS_per_gpu": throughput * 1e9, "latency": 1000.0 / throughput}


class Simulation:
    """Runs a method's operations as the master and runner would: trials start on Create, train on ValidateAfter
    (one at a time, oldest first), report or fail, and close on Close."""

    def __init__(self, method: dsat.BaseDSATSearchMethod, fail_always: bool = False) -> None:
        self.method, self.state, self.fail_always = method, SearcherState(), fail_always
        self.hparams: Dict[str, Dict[str, Any]] = {}
        self.pending: List[Tuple[str, int]] = []
        self.results: Dict[str, Any] = {}
        self.failed: List[str] = []
        self.shutdown: Optional[Shutdown] = None

    def apply(self, ops: List[Any]) -> None:
        for op in ops:
            if isinstance(op, Create):
                rid = str(op.request_id)
                assert rid not in self.hparams, "a request id is used once"
                self.hparams[rid] = op.hparams
                self.state.trials_created.add(uuid.UUID(rid))
                self.apply(self.method.on_trial_created(self.state, uuid.UUID(rid)))
            elif isinstance(op, ValidateAfter):
                self.pending.append((str(op.request_id), op.length))
            elif isinstance(op, Close):
                rid = uuid.UUID(str(op.request_id))
                self.state.trials_closed.add(rid)
                self.apply(self.method.on_trial_closed(self.state, rid))
            elif isinstance(op, Shutdown):
                self.shutdown = op

    def run(self, limit: int = 500) -> None:
        self.apply(self.method.initial_operations(self.state))
        steps = 0
        while self.pending and self.shutdown is None:
            steps += 1
            assert steps < limit, "the search does not end"
            rid, _ = self.pending.pop(0)
            config = _utils.get_ds_config_from_hparams(self.hparams[rid], MODEL)
            rid_uuid = uuid.UUID(rid)
            if config.get("autotuning", {}).get("model_info", {}).get("profile"):
                assert config["train_micro_batch_size_per_gpu"] == 1
                self.results[rid] = dict(PROFILE)
                self.apply(self.method.on_validation_completed(self.state, rid_uuid, dict(PROFILE), 1))
                continue
            mbs, stage = config["train_micro_batch_size_per_gpu"], config["zero_optimization"]["stage"]
            if self.fail_always or mbs > OOM_ABOVE:
                self.failed.append(rid)
                self.state.failures.add(rid_uuid)
                self.apply(self.method.on_trial_exited_early(self.state, rid_uuid, ExitedReason.ERRORED))
                self.state.trials_closed.add(rid_uuid)
                self.apply(self.method.on_trial_closed(self.state, rid_uuid))
            else:
                metric = _speed(mbs, stage)
                self.results[rid] = metric
                self.apply(self.method.on_validation_completed(self.state, rid_uuid, metric, 3))

    def configs(self) -> Dict[str, Dict[str, Any]]:
        return {rid: _utils.get_ds_config_from_hparams(h, MODEL) for rid, h in self.hparams.items()}


def _check_in_space(sim: Simulation, stages: List[int], max_mbs: int) -> None:
    profile_seen = 0
    for rid, config in sim.configs().items():
        hp = sim.hparams[rid]
        assert hp[_defaults.USE_DSAT_MODE_KEY] is True and hp["deepspeed_config"] == "ds_config.json"
        assert config["autotuning"]["enabled"] is True
        if config["autotuning"].get("model_info"):
            profile_seen += 1
            continue
        zero = config["zero_optimization"]
        assert zero["stage"] in stages
        space = _utils.get_zero_stage_search_space(zero["stage"])
        for key, value in zero.items():
            if key != "stage":
                assert value in space[key], (key, value)
        mbs = config["train_micro_batch_size_per_gpu"]
        assert 1 <= mbs <= max_mbs, mbs
        # the batch sizes agree with each other (1 slot, no accumulation)
        assert config["train_batch_size"] == mbs * config["gradient_accumulation_steps"]
    assert profile_seen == 1


def _expected_max_mbs(method: dsat.BaseDSATSearchMethod, stage: int) -> int:
    return method.trial_tracker.approx_max_mbs_per_stage[stage]


@pytest.mark.parametrize("name,extra", [
    ("binary", []),
    ("binary", ["--search-range-factor", "0.5"]),
    ("random", ["--trials-per-random-config", "3"]),
    ("asha", ["--max-rungs", "2", "--min-binary-search-trials", "2"]),
])
def test_search_picks_configs_in_the_space_handles_failures_and_reports_the_best(name: str, extra: List[str]) -> None:
    args = _args(name, "--max-trials", "12", "--max-concurrent-trials", "3", "--zero-stages", "1", "2", *extra)
    config = _run_dsat.get_custom_dsat_exp_conf_from_args(args)
    method = _run_dsat.get_search_method_class(name)(args=args, exp_config=config)
    sim = Simulation(method)
    sim.run()

    assert sim.shutdown is not None and not sim.shutdown.failure
    assert len(sim.hparams) <= 12  # the profiling trial included
    # The memory model: (16 GiB - weights, grads and Adam states - one activation) / activation memory per record.
    stage1 = _expected_max_mbs(method, 1)
    # fp32 weights and gradients (4 bytes each), Adam's two states (8) per parameter, on one slot at every stage
    act = PROFILE["activation_mem_per_gpu"]
    assert stage1 == (PROFILE["gpu_mem"] - 16 * PROFILE["num_params"] - act) // act == 1622
    factor = float(getattr(args, "search_range_factor", 1.0))
    ceiling = 2 * stage1 if name == "random" else int(stage1 * factor)
    _check_in_space(sim, [1, 2], ceiling)

    # Above OOM_ABOVE trials fail: the next trial of that binary search tries a smaller micro batch.
    assert sim.failed, "the simulated memory limit was never reached"
    for rid in sim.failed:
        trial = method.trial_tracker[uuid.UUID(rid)]
        assert trial.error and trial.mbs > OOM_ABOVE
        for child in trial.children:
            assert child.mbs < trial.mbs and child.search_data.hi == trial.mbs - 1

    # The best config is the fastest that ran, without the autotuning section.
    ran = {rid: m for rid, m in sim.results.items() if "FLOPS_per_gpu" in m}
    best_rid = max(ran, key=lambda r: ran[r]["FLOPS_per_gpu"])
    best = method.trial_tracker.best_trial
    assert best is not None and str(best.request_id) == best_rid
    best_config = method.best_ds_config()
    assert "autotuning" not in best_config
    assert best_config["train_micro_batch_size_per_gpu"] == sim.configs()[best_rid]["train_micro_batch_size_per_gpu"]
    assert best_config["train_micro_batch_size_per_gpu"] <= OOM_ABOVE


def test_binary_search_narrows_to_the_largest_micro_batch_that_fits() -> None:
    # One config at a time and enough trials: the binary search of the first config ends next to the limit.
    args = _args("binary", "--max-trials", "16", "--max-concurrent-trials", "1", "--zero-stages", "1")
    method = dsat.BinarySearchDSATSearchMethod(args=args, exp_config=_run_dsat.get_custom_dsat_exp_conf_from_args(args))
    sim = Simulation(method)
    sim.run()
    first_lineage = [t for _, t in method.trial_tracker if t.search_data is not None]
    mbs_tried = [t.mbs for t in sorted(first_lineage[0].lineage_set, key=lambda t: len(t.lineage_set))]
    ran = [t.mbs for t in first_lineage[0].lineage_set if not t.error]
    assert max(ran) == OOM_ABOVE, sorted(mbs_tried)
    assert method.trial_tracker.best_trial.mbs == OOM_ABOVE


def test_a_search_whose_trials_all_fail_fails_and_a_failed_profile_stops_it() -> None:
    args = _args("binary", "--max-trials", "5", "--zero-stages", "1")
    config = _run_dsat.get_custom_dsat_exp_conf_from_args(args)
    sim = Simulation(dsat.BinarySearchDSATSearchMethod(args=args, exp_config=config), fail_always=True)
    sim.run()
    assert sim.shutdown is not None and sim.shutdown.failure
    assert sim.method.trial_tracker.best_trial is None and sim.method.best_ds_config() is None

    method = dsat.RandomDSATSearchMethod(args=_args("random"), exp_config=config)
    state = SearcherState()
    [create, _] = method.initial_operations(state)
    rid = uuid.UUID(str(create.request_id))
    assert method.on_trial_exited_early(state, rid, ExitedReason.ERRORED) == []
    [shutdown] = method.on_trial_closed(state, rid)
    assert isinstance(shutdown, Shutdown) and shutdown.failure
    # A trial cancelled by a user stops the search at once.
    method = dsat.ASHADSATSearchMethod(args=_args("asha"), exp_config=config)
    [create, _] = method.initial_operations(state)
    [shutdown] = method.on_trial_exited_early(state, uuid.UUID(str(create.request_id)), ExitedReason.USER_CANCELED)
    assert isinstance(shutdown, Shutdown) and shutdown.failure


def test_random_early_stopping_and_state_round_trip(tmp_path: pathlib.Path) -> None:
    args = _args("random", "--max-trials", "40", "--early-stopping", "3", "--zero-stages", "1", "2")
    config = _run_dsat.get_custom_dsat_exp_conf_from_args(args)
    method = dsat.RandomDSATSearchMethod(args=args, exp_config=config)
    sim = Simulation(method)
    sim.run()
    assert sim.shutdown is not None and len(sim.hparams) < 40
    assert method.trial_tracker.num_trials_since_best_result >= 3
    method.save_method_state(tmp_path)
    assert json.loads((tmp_path / "best_ds_config.json").read_text()) == method.best_ds_config()
    restored = dsat.RandomDSATSearchMethod(args=args, exp_config=config)
    restored.load_method_state(tmp_path)
    assert restored.trial_tracker.best_trial.request_id == method.trial_tracker.best_trial.request_id
    assert restored.get_random_trial().hparams == method.get_random_trial().hparams  # the same random state


def test_the_autotuning_experiment_config(tmp_path: pathlib.Path) -> None:
    args = _args("asha", "--metric", "throughput", "--start-profile-step", "2", "--end-profile-step", "4")
    config = _run_dsat.get_custom_dsat_exp_conf_from_args(args)
    assert config["searcher"] == {"name": "custom", "metric": "throughput", "smaller_is_better": False,
                                  "unit": "batches"}
    assert config["hyperparameters"]["overwrite_deepspeed_args"]["autotuning"] == {
        "enabled": True, "start_profile_step": 2, "end_profile_step": 4}
    assert config["hyperparameters"]["_use_dsat_mode"] is True
    assert config["description"].startswith("DeepSpeed Autotune (asha)")

    raw = yaml.safe_load((MODEL / "dsat.yaml").read_text())
    del raw["hyperparameters"]["deepspeed_config"]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(raw))
    args.config_path = str(bad)
    with pytest.raises(ValueError, match="hyperparameters.deepspeed_config"):
        _run_dsat.get_custom_dsat_exp_conf_from_args(args)
    raw["hyperparameters"] = {"deepspeed_config": "ds_config.json", "lr": {"type": "double", "minval": 0, "maxval": 1}}
    bad.write_text(yaml.safe_dump(raw))
    with pytest.raises(ValueError, match="hyperparameters.lr is a search space"):
        _run_dsat.get_custom_dsat_exp_conf_from_args(args)
    raw["hyperparameters"] = {"deepspeed_config": "ds_config.json"}
    raw["entrypoint"] = "python3 train.py --deepspeed other.json"
    bad.write_text(yaml.safe_dump(raw))
    with pytest.raises(ValueError, match="other.json"):
        _run_dsat.get_custom_dsat_exp_conf_from_args(args)


def test_user_code_helpers(tmp_path: pathlib.Path) -> None:
    (tmp_path / "ds.json").write_text(json.dumps({"train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps":
                                                  "auto", "fp16": {"enabled": True}}))
    hparams = {"deepspeed_config": "ds.json",
               "overwrite_deepspeed_args": {"train_micro_batch_size_per_gpu": 32, "fp16": {"loss_scale": 0}}}
    assert dsat.get_ds_config_from_hparams(hparams, base_dir=tmp_path) == {
        "train_micro_batch_size_per_gpu": 32, "gradient_accumulation_steps": "auto",
        "fp16": {"enabled": True, "loss_scale": 0}}
    # Hugging Face: the file is rewritten with the overwrites and the batch flag follows it ("auto" is left alone).
    args = ["--model", "x", "--deepspeed", str(tmp_path / "ds.json"), "--per_device_train_batch_size", "8"]
    new = dsat.get_hf_args_with_overwrites(args, hparams)
    assert new == ["--model", "x", "--deepspeed", str(tmp_path / "ds.json"), "--per_device_train_batch_size", "32"]
    assert json.loads((tmp_path / "ds.json").read_text())["train_micro_batch_size_per_gpu"] == 32
    assert dsat.get_hf_args_with_overwrites(args, {"deepspeed_config": "ds.json"}) == args
    assert _utils.get_batch_config_from_mbs_gas_and_slots({"train_micro_batch_size_per_gpu": 3,
                                                          "gradient_accumulation_steps": 2}, slots=4) == {
        "train_batch_size": 24, "train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 2}
    assert set(_utils.get_zero_stage_search_space(3)) == {
        "reduce_bucket_size", "allgather_bucket_size", "overlap_comm", "reduce_scatter", "contiguous_gradients",
        "allgather_partitions"}
    assert _utils.get_zero_stage_search_space(0) == {}


def test_a_custom_search_takes_a_json_searcher_metric_and_others_a_number() -> None:
    from determined import core, errors
    from determined.core._searcher import SearcherContext

    def op(searcher_name: str) -> Any:
        ctx = SearcherContext(None, 1, core.DistributedContext(rank=0, size=1), None, local_lengths=[3],  # type: ignore
                              config={"searcher": {"name": searcher_name, "metric": "throughput"}})
        return ctx, core.SearcherOperation(ctx, 3)

    ctx, custom = op("custom")
    custom.report_completed({"throughput": np_float(2.5), "rank": 0})
    assert ctx.completed_operations == [{"length": 3, "metric": {"throughput": 2.5, "rank": 0}}]
    ctx, single = op("single")
    with pytest.raises(errors.DeterminedError, match="only a custom search takes a JSON value"):
        single.report_completed({"throughput": 2.5})
    single.report_completed(1.5)
    assert ctx.completed_operations == [{"length": 3, "metric": 1.5}]


def np_float(value: float) -> Any:
    import numpy

    return numpy.float32(value)
