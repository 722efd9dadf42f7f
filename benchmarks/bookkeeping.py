"""Bookkeeping overhead: many trivial trials, total time ÷ the theoretical minimum for the slots used.

Every trial does `--work` seconds of work (a sleep) and reports one validation metric; with N trials on S slots
no scheduler can finish before N × work ÷ S seconds, so the ratio of the measured time to that minimum is the
cost of the bookkeeping around each trial (start, report, record, end, start the next). Three variants run the
same workload in the same run:

* ours, local RM: `det experiment create` in the foreground (embedded master, `--cpu-slots S`);
* ours, Ray RM: a Ray head with S CPUs, `det master up --resource-manager ray`, `det experiment create`
  through DET_MASTER;
* Ray Tune: `tune.Tuner` with a function trainable doing the same work and one report, 1 CPU per trial,
  `ray.init(num_cpus=S)`.

Ours is timed from submission to COMPLETED (the experiment's start_time → end_time as the master recorded them);
Ray Tune from `Tuner.fit()` to its return (after `ray.init`). Anything that starts Ray runs in a private network
and process namespace (`unshare -n -p -f --mount-proc`, loopback only) that this script re-executes itself in,
so every Ray process it started ends with it; that needs root (otherwise those variants are skipped). Ray runs
with token authentication (`RAY_AUTH_MODE=token`) and a `RAY_AUTH_TOKEN` made for the run unless one is set.

    .venv/bin/pip install -r benchmarks/requirements-bookkeeping.txt
    .venv/bin/python benchmarks/bookkeeping.py                    # 200 trials of 1 s on 2 slots
    .venv/bin/python benchmarks/bookkeeping.py --trials 20        # quick
    .venv/bin/python benchmarks/bookkeeping.py --variants local --trials 40 --work 0.5
"""
import argparse
import datetime
import importlib
import json
import os
import pathlib
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Any, Dict, List, Optional

REPO = pathlib.Path(__file__).resolve().parent.parent
VARIANTS = ("local", "ray-rm", "tune")
TITLES = {"local": "ours, local RM", "ray-rm": "ours, Ray RM", "tune": "Ray Tune"}

TRIVIAL_TRIAL = textwrap.dedent('''\
    """A trivial Core API trial: for each searcher operation, WORK seconds of work and one validation metric."""
    import os
    import time

    from determined import core

    WORK_S = float(os.environ.get("BOOKKEEPING_WORK_S", "{work}"))

    with core.init() as ctx:
        for op in ctx.searcher.operations():
            time.sleep(WORK_S)
            loss = float(ctx.info.hparams["x"])
            ctx.train.report_validation_metrics(op.length, {{"loss": loss}})
            op.report_completed(loss)
''')


def _config(trials: int) -> str:
    return textwrap.dedent(f"""\
        description: bookkeeping
        searcher:
          name: random
          metric: loss
          smaller_is_better: true
          max_trials: {trials}
          max_length:
            batches: 1
        hyperparameters:
          global_batch_size: 1
          x:
            type: double
            minval: 0.0
            maxval: 1.0
        max_restarts: 0
        checkpoint_policy: none
        internal:
          native:
            command: [trivial.py]
        """)


def _model_dir(tmp: pathlib.Path, trials: int, work: float) -> pathlib.Path:
    model = tmp / "model"
    model.mkdir()
    (model / "trivial.py").write_text(TRIVIAL_TRIAL.format(work=work))
    (tmp / "bookkeeping.yaml").write_text(_config(trials))
    return model


def _det() -> List[str]:
    return [sys.executable, "-m", "determined.cli.main"]


def _env(data_dir: pathlib.Path, work: float) -> Dict[str, str]:
    env = dict(os.environ)
    env.pop("DET_MASTER", None)
    env.update({"DET_DATA_DIR": str(data_dir), "BOOKKEEPING_WORK_S": str(work), "PYTHONPATH": str(REPO)})
    return env


def _parse_time(value: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))


def _experiment_result(env: Dict[str, str], exp_id: int, trials: int, work: float, slots: int,
                       wall: float) -> Dict[str, Any]:
    out = subprocess.run([*_det(), "experiment", "describe", str(exp_id), "--json"], env=env, check=True,
                         capture_output=True, text=True, timeout=120).stdout
    exp = json.loads(out)
    states = [t["state"] for t in exp["trials"]]
    if exp["state"] != "COMPLETED" or len(states) != trials or set(states) != {"COMPLETED"}:
        raise RuntimeError(f"experiment {exp_id} ended {exp['state']} with trials {sorted(set(states))} "
                           f"({len(states)} of {trials})")
    total = (_parse_time(exp["end_time"]) - _parse_time(exp["start_time"])).total_seconds()
    return _result(total, trials, work, slots, wall=wall)


def _result(total: float, trials: int, work: float, slots: int, **extra: Any) -> Dict[str, Any]:
    minimum = trials * work / slots
    return {"total_s": total, "minimum_s": minimum, "ratio": total / minimum,
            "per_trial_overhead_s": (total - minimum) * slots / trials, **extra}


# ------------------------------------------------------------------ ours, local resource manager

def run_local(trials: int, slots: int, work: float) -> Dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="det-bookkeeping-") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        model = _model_dir(tmp, trials, work)
        env = _env(tmp / "data", work)
        started = time.monotonic()
        proc = subprocess.run([*_det(), "experiment", "create", str(tmp / "bookkeeping.yaml"), str(model),
                               "--cpu-slots", str(slots)], env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        wall = time.monotonic() - started
        if proc.returncode != 0:
            raise RuntimeError(f"det experiment create exited {proc.returncode}: {proc.stderr[-2000:]}")
        return _experiment_result(env, 1, trials, work, slots, wall)


# ------------------------------------------------------------------ inside the private namespace

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ray_env() -> Dict[str, str]:
    """The environment of everything Ray here: token authentication with a token of this run's own (made once
    and inherited by the namespace run, so that the head, the master and Tune share it), unless one is set."""
    if not os.environ.get("RAY_AUTH_TOKEN"):
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
    env = dict(os.environ)
    env.update({"RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token", "PYTHONPATH": str(REPO)})
    return env


def _wait_for_master(data_dir: pathlib.Path, proc: "subprocess.Popen[bytes]", log: pathlib.Path,
                     timeout: float = 180.0) -> str:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"det master up exited {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
        try:
            lock = json.loads((data_dir / "master.lock").read_text())
            if lock.get("pid") == proc.pid and lock.get("url"):
                httpx.get(lock["url"] + "/api/v1/master/info", timeout=2).raise_for_status()
                return str(lock["url"])
        except (OSError, ValueError, httpx.HTTPError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"det master up did not start serving: {log.read_text(errors='replace')[-2000:]}")


_RAY_TEMP_DIRS: List[str] = []


def _ray_temp_dir() -> str:
    """A short private directory for Ray's sessions (its socket paths must stay under 108 characters)."""
    path = tempfile.mkdtemp(prefix="bkr-", dir="/tmp")
    _RAY_TEMP_DIRS.append(path)
    return path


def _ray_rm_available() -> Optional[str]:
    """None when `det master up` has `--resource-manager`; else why the variant is skipped."""
    out = subprocess.run([*_det(), "master", "up", "--help"], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(REPO))).stdout
    if "--resource-manager" not in out:
        return "`det master up` has no --resource-manager option in this checkout"
    return None


def _in_namespace_ray_rm(trials: int, slots: int, work: float) -> Dict[str, Any]:
    reason = _ray_rm_available()
    if reason:
        return {"skipped": reason}
    with tempfile.TemporaryDirectory(prefix="det-bookkeeping-ray-") as tmp_name:
        tmp = pathlib.Path(tmp_name)
        model = _model_dir(tmp, trials, work)
        env = {**_env(tmp / "data", work), **_ray_env()}
        port = _free_port()
        ray_bin = str(pathlib.Path(sys.executable).parent / "ray")
        subprocess.run([ray_bin, "start", "--head", "--port", str(port), "--num-cpus", str(slots),
                        "--include-dashboard=false", "--disable-usage-stats", "--temp-dir", _ray_temp_dir()], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=180)
        log = tmp / "master.log"
        with open(log, "wb") as log_file:
            master = subprocess.Popen([*_det(), "master", "up", "--resource-manager", "ray", "--ray-address",
                                       f"127.0.0.1:{port}", "--host", "127.0.0.1", "--port", "0", "--data-dir",
                                       str(tmp / "data")], env=env, stdin=subprocess.DEVNULL, stdout=log_file,
                                      stderr=subprocess.STDOUT)
            try:
                url = _wait_for_master(tmp / "data", master, log)
                client_env = dict(env, DET_MASTER=url)
                started = time.monotonic()
                proc = subprocess.run([*_det(), "experiment", "create", str(tmp / "bookkeeping.yaml"), str(model)],
                                      env=client_env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True)
                wall = time.monotonic() - started
                if proc.returncode != 0:
                    raise RuntimeError(f"det experiment create exited {proc.returncode}: {proc.stderr[-2000:]}\n"
                                       f"master log: {log.read_text(errors='replace')[-2000:]}")
                return _experiment_result(client_env, 1, trials, work, slots, wall)
            finally:
                if master.poll() is None:
                    master.send_signal(signal.SIGTERM)
                    try:
                        master.wait(60)
                    except subprocess.TimeoutExpired:
                        master.kill()
                        master.wait()


def _in_namespace_tune(trials: int, slots: int, work: float) -> Dict[str, Any]:
    os.environ.update(_ray_env())
    import ray
    from ray import tune

    def trainable(config: Dict[str, Any]) -> None:
        time.sleep(work)
        tune.report({"loss": config["x"]})

    with tempfile.TemporaryDirectory(prefix="tune-bookkeeping-") as tmp:
        # address="local" and a temp dir of its own: never join another Ray cluster of this machine (/tmp/ray is
        # shared with the host even inside the namespace)
        ray.init(address="local", num_cpus=slots, include_dashboard=False, logging_level="WARNING",
                 log_to_driver=False, _temp_dir=_ray_temp_dir())
        try:
            tuner = tune.Tuner(
                tune.with_resources(trainable, {"cpu": 1}),
                param_space={"x": tune.uniform(0.0, 1.0)},
                tune_config=tune.TuneConfig(num_samples=trials, metric="loss", mode="min"),
                run_config=tune.RunConfig(storage_path=tmp, name="bookkeeping", verbose=0),
            )
            started = time.monotonic()
            results = tuner.fit()
            total = time.monotonic() - started
            errors = [r.error for r in results if r.error is not None]
            if len(results) != trials or errors:
                raise RuntimeError(f"Ray Tune ran {len(results)} of {trials} trials; errors: {errors[:3]}")
            return _result(total, trials, work, slots)
        finally:
            ray.shutdown()


def _namespace_main(variant: str, trials: int, slots: int, work: float, out: str) -> int:
    """PID 1 of the private namespace: run one Ray variant, write its result as JSON to `out`."""
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    try:
        run = _in_namespace_tune if variant == "tune" else _in_namespace_ray_rm
        result = run(trials, slots, work)
    except Exception as e:  # reported by the parent as the variant's failure
        result = {"error": f"{e.__class__.__name__}: {e}"}
    pathlib.Path(out).write_text(json.dumps(result))
    for path in _RAY_TEMP_DIRS:  # the Ray processes in it end with this namespace
        shutil.rmtree(path, ignore_errors=True)
    return 0


def _namespace_unavailable() -> Optional[str]:
    if os.geteuid() != 0:
        return "not root: the Ray variants run in a private network and process namespace (unshare), which needs root"
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "`unshare` or `ip` is not installed: the Ray variants need a private namespace"
    try:
        importlib.import_module("ray.tune")
    except ImportError as e:
        return f"{e}: pip install -r benchmarks/requirements-bookkeeping.txt"
    return None


def run_in_namespace(variant: str, trials: int, slots: int, work: float) -> Dict[str, Any]:
    reason = _namespace_unavailable()
    if reason:
        return {"skipped": reason}
    with tempfile.TemporaryDirectory(prefix="det-bookkeeping-ns-") as tmp:
        out = os.path.join(tmp, "result.json")
        cmd = ["unshare", "-n", "-p", "-f", "--mount-proc", sys.executable, __file__, "--_namespace", variant,
               "--trials", str(trials), "--slots", str(slots), "--work", str(work), "--_out", out]
        proc = subprocess.run(cmd, env=_ray_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True)
        if not os.path.exists(out):
            return {"error": f"the namespace run exited {proc.returncode} without a result: "
                             f"{(proc.stderr or proc.stdout)[-2000:]}"}
        return json.loads(pathlib.Path(out).read_text())


# ------------------------------------------------------------------ the comparison

def _line(variant: str, r: Dict[str, Any]) -> str:
    if "skipped" in r:
        return f"{TITLES[variant]}: skipped: {r['skipped']}"
    if "error" in r:
        return f"{TITLES[variant]}: failed: {r['error']}"
    wall = f" (command wall {r['wall']:.1f} s)" if "wall" in r else ""
    return (f"{TITLES[variant]}: total {r['total_s']:.1f} s{wall}, theoretical minimum {r['minimum_s']:.1f} s, "
            f"ratio {r['ratio']:.3f}, overhead per trial {r['per_trial_overhead_s']:.3f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=200, help="trials per variant (default 200; 20 is quick)")
    parser.add_argument("--slots", type=int, default=2, help="slots (CPUs) the trials share (default 2)")
    parser.add_argument("--work", type=float, default=1.0, help="seconds of work (a sleep) per trial (default 1)")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--json", default=None, metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--_namespace", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--_out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._namespace:
        return _namespace_main(args._namespace, args.trials, args.slots, args.work, args._out)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        parser.error(f"--variants: unknown {unknown}; choose from {', '.join(VARIANTS)}")
    if args.trials < 1 or args.slots < 1 or args.work <= 0:
        parser.error("--trials and --slots must be positive integers and --work a positive number of seconds")
    print(f"{args.trials} trials of {args.work:g} s of work on {args.slots} slots; theoretical minimum "
          f"{args.trials * args.work / args.slots:.1f} s ({os.cpu_count()} cores on this machine)", flush=True)
    results: Dict[str, Dict[str, Any]] = {}
    for variant in variants:
        print(f"{TITLES[variant]} …", flush=True)
        try:
            if variant == "local":
                results[variant] = run_local(args.trials, args.slots, args.work)
            else:
                results[variant] = run_in_namespace(variant, args.trials, args.slots, args.work)
        except Exception as e:
            results[variant] = {"error": f"{e.__class__.__name__}: {e}"}
        print("  " + _line(variant, results[variant]), flush=True)
    print()
    print(f"{'variant':<16} {'total s':>9} {'minimum s':>10} {'ratio':>7} {'s/trial over':>13}")
    for variant in variants:
        r = results[variant]
        if "ratio" in r:
            print(f"{TITLES[variant]:<16} {r['total_s']:>9.1f} {r['minimum_s']:>10.1f} {r['ratio']:>7.3f} "
                  f"{r['per_trial_overhead_s']:>13.3f}")
        else:
            print(f"{TITLES[variant]:<16} {'skipped' if 'skipped' in r else 'failed':>9}")
    if "tune" in results and "ratio" in results["tune"]:
        for variant in ("local", "ray-rm"):
            if "ratio" in results.get(variant, {}):
                print(f"{TITLES[variant]} / Ray Tune: {results[variant]['total_s'] / results['tune']['total_s']:.3f}")
    print("goal: ratio <= 1.05 (Ray Tune's own release test reaches 1.14)")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(results, indent=2))
    return 1 if any("error" in r for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
