"""`python3 -m determined.pytorch.dsat {binary,random,asha} CONFIG MODEL_DIR [options]` (docs/dsat.md).

The command runs the search with `LocalSearchRunner` of the client SDK, in this process, against the master
(DET_MASTER's, or the data dir's embedded master); it is the one module of determined.pytorch that uses the SDK,
and no module imports it.
"""
import argparse
import json
import logging
import os
import pathlib
import sys
import tempfile
from typing import List, Optional

import determined as det
from determined.pytorch.dsat._run_dsat import (
    BEST_CONFIG_FILE,
    BEST_METRICS_FILE,
    check_args,
    full_experiment_config,
    get_custom_dsat_exp_conf_from_args,
    get_search_method_class,
)


def run_autotuning(args: argparse.Namespace) -> int:
    """Run the search until it ends; print and save the best DeepSpeed config. Returns the exit status."""
    from determined.experimental._search_runner import LocalSearchRunner

    check_args(args)
    exp_config = get_custom_dsat_exp_conf_from_args(args)
    method = get_search_method_class(args.search_method)(args=args, exp_config=exp_config)
    searcher_dir = pathlib.Path(args.searcher_dir or tempfile.mkdtemp(prefix="dsat-"))
    print(f"DeepSpeed Autotune ({args.search_method}): the search's state is kept in {searcher_dir}", flush=True)
    runner = LocalSearchRunner(method, searcher_dir=searcher_dir)
    experiment_id = runner.run(exp_config, model_dir=args.model_dir, includes=args.include)
    tracker = runner.search_method.trial_tracker  # type: ignore[attr-defined]
    best = tracker.best_trial
    completed = [t for _, t in tracker if t.completed]
    print(f"Experiment {experiment_id}: {len(completed)} trials ({sum(t.error for t in completed)} failed)", flush=True)
    if best is None:
        print(f"DeepSpeed Autotune found no config that runs: `det experiment describe {experiment_id}` lists the "
              "trials, `det trial logs ID` shows why each failed", flush=True)
        return 1
    best_config = runner.search_method.best_ds_config()  # type: ignore[attr-defined]
    (searcher_dir / BEST_CONFIG_FILE).write_text(json.dumps(best_config, indent=2))
    (searcher_dir / BEST_METRICS_FILE).write_text(json.dumps(best.metric, indent=2))
    print(f"Best DeepSpeed config ({args.metric} = {best.searcher_metric_val:g}; written to "
          f"{searcher_dir / BEST_CONFIG_FILE}):", flush=True)
    print(json.dumps(best_config, indent=2), flush=True)
    if args.run_full_experiment:
        from determined.experimental import _run

        desc = _run.run_experiment(full_experiment_config(args, best.hparams), args.model_dir)
        return _run.exit_code_for(desc)
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    from determined.pytorch.dsat._cli import get_full_parser

    args = get_full_parser().parse_args(argv)
    args.config_path = os.path.abspath(args.config_path)
    args.model_dir = os.path.abspath(args.model_dir)
    args.include = [os.path.abspath(p) for p in args.include] if args.include else []
    try:
        return run_autotuning(args)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    sys.exit(main())
