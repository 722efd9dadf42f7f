"""Fair share between two users: their slot-seconds over a run of 1-second trials (issue 32's target: 50 % +- 10 %).

A master (in this process, on 127.0.0.1, a temporary data dir) with --slots slots (default 2) in one pool whose
scheduler is --scheduler (`fair_share` by default; `priority` shares slots within one priority by weight too).
Its resource manager simulates each trial run in a thread of this process: the run pulls its operation through
the master's protocol functions, "trains" for --trial-seconds (default 1 s), reports a validation and completes
the operation; a run the master preempts stops at once without completing it (its trial goes back to the queue).
Two users, alice and bob, each submit one random search (weight 1, the default; more trials than the run can
finish) through the REST API as themselves, alice a moment before bob. For --minutes minutes the script records
every run's start and end, then prints each user's slot-seconds and share of the slots used, over the whole run
and per minute, the preemptions, and the load average.

    .venv/bin/python benchmarks/fair_share.py --minutes 3
    .venv/bin/python benchmarks/fair_share.py --minutes 10 --scheduler priority
"""
import argparse
import os
import pathlib
import sys
import tempfile
import time
from typing import Any, Dict, List

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import httpx  # noqa: E402

from determined.master import embedded  # noqa: E402
from determined.master.lifecycle import protocol  # noqa: E402
from determined.master.lifecycle.experiment import get_trial  # noqa: E402
from determined.master.scheduling import pools  # noqa: E402
from master_load import _model_def  # noqa: E402
from master_scale import SimulatedRM  # noqa: E402

USERS = ("alice", "bob")


class RecordingRM(SimulatedRM):
    """SimulatedRM that records each run's (experiment, start, end) and stops a preempted run at once."""

    def __init__(self, slots: int, work: Any) -> None:
        super().__init__(slots, work=work, threads=slots + 2)
        self.runs: Dict[str, List[Any]] = {}  # allocation id -> [experiment id, start, end or None]
        self.preempted: Dict[str, bool] = {}
        self.preemptions = 0  # runs the master asked to give their slot up (also runs done with their work)
        self.cut_short = 0  # of them, runs stopped before their trial's work was done

    def launch(self, *, trial_id: int, experiment_id: int, allocation_id: str, token: str, slots_needed: int,
               master_url: str, env: Any = None, script: bool = False, **_: Any) -> None:
        with self._lock:
            self.runs[allocation_id] = [experiment_id, time.monotonic(), None]
        super().launch(trial_id=trial_id, experiment_id=experiment_id, allocation_id=allocation_id, token=token,
                       slots_needed=slots_needed, master_url=master_url, env=env, script=script)

    def _worker(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            trial_id, allocation_id = item
            code = 0
            try:
                self.work(trial_id, allocation_id)  # type: ignore[misc]
            except Exception as e:  # a simulated run that fails exits 1, as a process would
                print(f"  simulated trial {trial_id} failed: {e}", file=sys.stderr)
                code = 1
            self._exit(allocation_id, code)

    def _exit(self, allocation_id: str, code: int) -> None:
        with self._lock:
            run = self.runs.get(allocation_id)
            if run is not None and run[2] is None:
                run[2] = time.monotonic()
        super()._exit(allocation_id, code)

    def preempt(self, allocation_id: str, timeout: float) -> None:
        with self._lock:
            if allocation_id in self._runs and not self.preempted.get(allocation_id):
                self.preempted[allocation_id] = True
                self.preemptions += 1
        self._exit(allocation_id, 0)


def slot_seconds(runs: List[List[Any]], owner: Dict[int, str], start: float, end: float) -> Dict[str, float]:
    """Each user's slot-seconds (1-slot runs) within [start, end]."""
    out = {user: 0.0 for user in USERS}
    for exp_id, began, ended in runs:
        ended = end if ended is None else ended
        overlap = min(ended, end) - max(began, start)
        if overlap > 0 and exp_id in owner:
            out[owner[exp_id]] += overlap
    return out


def run(minutes: float, slots: int, scheduler: str, trial_seconds: float) -> Dict[str, Any]:
    box: List[Any] = []

    def work(trial_id: int, allocation_id: str) -> None:
        m, rm = box[0].master, box[1]
        with m.write() as s:
            op = protocol.next_operation(s, get_trial(s, trial_id))
        if "length" not in op:
            return
        until = time.monotonic() + trial_seconds
        while time.monotonic() < until:  # "training"; a preempted run stops here without completing its work
            if rm.preempted.get(allocation_id):
                with rm._lock:
                    rm.cut_short += 1
                return
            time.sleep(0.02)
        with m.write() as s:
            trial = get_trial(s, trial_id)
            metric = 1.0 / (1 + trial_id % 97)
            protocol.report_validation(s, trial, {"steps_completed": op["length"],
                                                  "metrics": {"validation_loss": metric}})
            protocol.complete_operation(s, trial, {"length": op["length"], "metric": metric})

    def factory(_work: str, _sink: Any) -> RecordingRM:
        box.append(RecordingRM(slots, work))
        return box[-1]

    trials = int(minutes * 60 * slots / trial_seconds) + 50  # more than the run can finish: both always have work
    config = {
        "entrypoint": "model:T",
        "searcher": {"name": "random", "metric": "validation_loss", "max_length": {"batches": 1},
                     "max_trials": trials},
        "hyperparameters": {"global_batch_size": 32, "lr": {"type": "log", "base": 10, "minval": -4, "maxval": -1}},
        "max_restarts": 0,
    }
    cluster = pools.parse({"scheduler": {"type": scheduler, "preemption": True} if scheduler == "priority"
                           else {"type": scheduler}})
    master = None
    with tempfile.TemporaryDirectory(prefix="det-fair-share-") as tmp:
        try:
            master = embedded.start(pathlib.Path(tmp) / "data", resource_manager=factory, preemption_timeout=5,
                                    resource_pools=cluster)
            rm = box[0]
            box.insert(0, master)
            admin = httpx.Client(base_url=master.url + "/api/v1", timeout=600)
            token = admin.post("/auth/login", json={"username": "admin", "password": ""}).json()["token"]
            admin.headers["Authorization"] = f"Bearer {token}"
            owner: Dict[int, str] = {}
            for user in USERS:
                admin.post("/users", json={"username": user, "password": "fair-share-1"}).raise_for_status()
            clients = {}
            for user in USERS:
                c = httpx.Client(base_url=master.url + "/api/v1", timeout=600)
                token = c.post("/auth/login", json={"username": user, "password": "fair-share-1"}).json()["token"]
                c.headers["Authorization"] = f"Bearer {token}"
                clients[user] = c
            for user in USERS:
                resp = clients[user].post("/experiments", json={"config": dict(config, name=f"{user}-search"),
                                                                "model_definition": _model_def()})
                resp.raise_for_status()
                owner[resp.json()["experiment"]["id"]] = user
            started = time.monotonic()
            load_samples: List[float] = []
            while time.monotonic() - started < minutes * 60:
                time.sleep(5)
                load_samples.append(os.getloadavg()[0])
            ended = time.monotonic()
            with rm._lock:
                runs = [list(r) for r in rm.runs.values()]
                preemptions, cut_short = rm.preemptions, rm.cut_short
            total = slot_seconds(runs, owner, started, ended)
            per_minute: List[Dict[str, float]] = []
            t = started
            while t + 60 <= ended + 1e-6:
                per_minute.append(slot_seconds(runs, owner, t, t + 60))
                t += 60
            for c in clients.values():
                c.close()
            admin.close()
            return {"minutes": minutes, "slots": slots, "scheduler": scheduler, "trial_seconds": trial_seconds,
                    "slot_seconds": total, "capacity_slot_seconds": slots * (ended - started),
                    "per_minute": per_minute, "runs": len(runs), "preemptions": preemptions, "cut_short": cut_short,
                    "load_avg": sum(load_samples) / max(1, len(load_samples)),
                    "load_max": max(load_samples, default=0.0)}
        finally:
            if master is not None:
                master.stop(timeout=10)
            if len(box) > 1:
                box[1].close()


def share(values: Dict[str, float], user: str) -> float:
    used = sum(values.values())
    return 100.0 * values[user] / used if used else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the run (default 10, as issue 32)")
    parser.add_argument("--slots", type=int, default=2, help="slots of the pool (default 2)")
    parser.add_argument("--scheduler", choices=["fair_share", "priority"], default="fair_share",
                        help="the pool's scheduler (default fair_share; priority: one priority, shared by weight)")
    parser.add_argument("--trial-seconds", type=float, default=1.0, help="length of one trial run (default 1 s)")
    args = parser.parse_args()
    print(f"fair share: alice and bob (weight 1 each) on {args.slots} slots, scheduler {args.scheduler}, "
          f"{args.trial_seconds:g}-second trials, {args.minutes:g} minutes …", flush=True)
    r = run(args.minutes, args.slots, args.scheduler, args.trial_seconds)
    total = r["slot_seconds"]
    used = sum(total.values())
    print(f"  runs: {r['runs']}; asked to give their slot up: {r['preemptions']}, of which {r['cut_short']} before "
          f"their trial's work was done; slots used {used:.0f} of "
          f"{r['capacity_slot_seconds']:.0f} slot-seconds ({100 * used / r['capacity_slot_seconds']:.1f} %)")
    for user in USERS:
        print(f"  {user}: {total[user]:.0f} slot-seconds, {share(total, user):.1f} % of the slots used")
    minute_shares = [share(m, "alice") for m in r["per_minute"]]
    if minute_shares:
        print("  alice's share per minute: " + ", ".join(f"{s:.1f} %" for s in minute_shares))
    ok = abs(share(total, "alice") - 50.0) <= 10.0
    print(f"  target 50 % +- 10 % each: {'met' if ok else 'MISSED'}; load average during the run "
          f"{r['load_avg']:.1f} (max {r['load_max']:.1f}, {os.cpu_count()} cores)", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
