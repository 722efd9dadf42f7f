"""Start-up: a whole 1-batch PyTorch experiment ÷ the imports such a trial needs, and submit → first batch on a
running master.

Both figures are measured in one run against their baselines, the repeats interleaved so that the machine's load
drifts over every variant alike:

* **whole experiment**: `det experiment create` of the digits MLP (examples/digits_pytorch, `max_length` 1
  batch, one validation, one checkpoint) on a fresh data dir (embedded master), as a whole process, ÷
  `python -c 'import torch, sklearn.datasets'`; with the fork server (the default) and without it
  (`DET_FORK_SERVER=0`: the trial imports torch in a process of its own, as before).
* **second experiment**: on a running `det master up`, after a first experiment of the same framework, the time
  from starting `det experiment create --detach` to the first batch's training metrics (their `end_time` as the
  master recorded them); again with and without the fork server (two masters, one after the other).

    .venv/bin/python benchmarks/startup.py                 # 3 repeats of each
    .venv/bin/python benchmarks/startup.py --repeats 5 --second 4
"""
import argparse
import datetime
import os
import pathlib
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

from bookkeeping import _wait_for_master  # this directory's: the same wait for `det master up`

REPO = pathlib.Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "digits_pytorch"
CONFIG = """\
description: startup benchmark (digits MLP, 1 batch)
entrypoint: model_def:DigitsTrial
hyperparameters:
  global_batch_size: 32
  learning_rate: 0.001
  hidden_size: 64
  dropout: 0.2
records_per_epoch: 1437
searcher:
  name: single
  metric: validation_accuracy
  smaller_is_better: false
  max_length:
    batches: 1
min_validation_period:
  batches: 1
scheduling_unit: 1
"""


def _det() -> List[str]:
    return [sys.executable, "-m", "determined.cli.main"]


def _env(data_dir: pathlib.Path, warm: bool) -> Dict[str, str]:
    env = dict(os.environ)
    env.pop("DET_MASTER", None)
    env.update({"DET_DATA_DIR": str(data_dir), "PYTHONPATH": str(REPO)})
    if not warm:
        env["DET_FORK_SERVER"] = "0"
    return env


def _timed(cmd: List[str], env: Dict[str, str]) -> float:
    started = time.monotonic()
    proc = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:5])} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return time.monotonic() - started


def _prepare(tmp: pathlib.Path) -> pathlib.Path:
    model = tmp / "model"
    model.mkdir()
    for name in ("model_def.py", "data.py"):
        shutil.copy(EXAMPLE / name, model / name)
    (tmp / "one.yaml").write_text(CONFIG)
    return model


def whole_experiment(tmp: pathlib.Path, model: pathlib.Path, repeats: int) -> Dict[str, List[float]]:
    times: Dict[str, List[float]] = {"imports": [], "cold": [], "warm": []}
    imports = [sys.executable, "-c", "import torch, sklearn.datasets"]
    for r in range(repeats):
        order = ["imports", "cold", "warm"] if r % 2 == 0 else ["warm", "cold", "imports"]
        for variant in order:
            if variant == "imports":
                times[variant].append(_timed(imports, dict(os.environ)))
                continue
            data = tmp / f"data-{variant}-{r}"
            times[variant].append(_timed([*_det(), "experiment", "create", str(tmp / "one.yaml"), str(model)],
                                         _env(data, variant == "warm")))
            shutil.rmtree(data, ignore_errors=True)
        print(f"  repeat {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()), flush=True)
    return times


def _first_batch_after(env: Dict[str, str], tmp: pathlib.Path, model: pathlib.Path) -> float:
    from determined.common.api import Session

    submitted = datetime.datetime.now(datetime.timezone.utc)
    out = subprocess.run([*_det(), "experiment", "create", str(tmp / "one.yaml"), str(model), "--detach"], env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"det experiment create exited {out.returncode}: {out.stderr[-2000:]}")
    exp_id = int(out.stdout.split("Created experiment")[1].split()[0])
    session = Session(env["DET_MASTER"])
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        answer = session.get(f"/experiments/{exp_id}")
        exp, trials = answer["experiment"], answer.get("trials") or []
        if exp["state"] in ("COMPLETED", "ERROR", "CANCELED") and trials:
            if exp["state"] != "COMPLETED":
                raise RuntimeError(f"experiment {exp_id} ended {exp['state']}")
            rows = session.get(f"/trials/{trials[0]['id']}/metrics?group=training")["metrics"]
            first = datetime.datetime.fromisoformat(str(rows[0]["end_time"]).replace("Z", "+00:00"))
            if first.tzinfo is None:
                first = first.replace(tzinfo=datetime.timezone.utc)
            return (first - submitted).total_seconds()
        time.sleep(0.2)
    raise RuntimeError(f"experiment {exp_id} did not end")


def second_experiment(tmp: pathlib.Path, model: pathlib.Path, count: int) -> Dict[str, List[float]]:
    times: Dict[str, List[float]] = {}
    for variant in ("warm", "cold"):
        data = tmp / f"master-{variant}"
        env = _env(data, variant == "warm")
        log = open(tmp / f"master-{variant}.log", "wb")
        master = subprocess.Popen([*_det(), "master", "up", "--host", "127.0.0.1", "--port", "0", "--data-dir",
                                   str(data)], env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            env["DET_MASTER"] = _wait_for_master(data, master, tmp / f"master-{variant}.log")
            first = _first_batch_after(env, tmp, model)
            times[variant] = [_first_batch_after(env, tmp, model) for _ in range(count)]
            print(f"  {variant}: first experiment {first:.2f} s, then " +
                  ", ".join(f"{t:.2f}" for t in times[variant]) + " s", flush=True)
        finally:
            master.send_signal(signal.SIGTERM)
            try:
                master.wait(60)
            except subprocess.TimeoutExpired:
                master.kill()
                master.wait()
            log.close()
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each whole-experiment variant")
    parser.add_argument("--second", type=int, default=3, help="experiments timed after the first on a running master")
    parser.add_argument("--skip-whole", action="store_true")
    parser.add_argument("--skip-second", action="store_true")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} (2-core machine shared with other jobs: compare ratios)")
    with tempfile.TemporaryDirectory(prefix="det-startup-") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        model = _prepare(tmp)
        if not args.skip_whole:
            print("whole 1-batch experiment (embedded master) vs `python -c 'import torch, sklearn.datasets'`:")
            t = whole_experiment(tmp, model, args.repeats)
            med = {k: statistics.median(v) for k, v in t.items()}
            low = {k: min(v) for k, v in t.items()}
            for variant in ("cold", "warm"):
                print(f"  {variant}: median {med[variant]:.2f} s, ratio {med[variant] / med['imports']:.2f} "
                      f"(by minima {low[variant] / low['imports']:.2f}); imports median {med['imports']:.2f} s")
        if not args.skip_second:
            print("running master: `det experiment create --detach` -> first batch, after a first experiment:")
            s = second_experiment(tmp, model, args.second)
            for variant, values in s.items():
                print(f"  {variant}: median {statistics.median(values):.2f} s, min {min(values):.2f} s")
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
