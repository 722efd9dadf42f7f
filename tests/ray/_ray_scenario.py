"""A scenario of the Ray resource manager, run as PID 1 of a private network and PID namespace.

    unshare -n -p -f --mount-proc sh -c 'ip link set lo up && exec python _ray_scenario.py SCENARIO OUT.json DIR'

It starts a Ray head and a second Ray node, `det master up --resource-manager ray`, runs experiments with
the `det` CLI, and writes what it saw to OUT.json. Everything it started ends with it (the namespace ends
when its PID 1 exits), so it never needs `ray stop`.

SCENARIO `spread` (2 CPUs per node; the second node has a tmpfs over DIR/private): submission errors, an
experiment of 6 trials on 4 slots over both nodes (the last two reuse finished runs),
pause / activate / kill releasing the placement groups; with the head disabled, a command and a notebook on node2
(issue 31), the notebook reached through the master's proxy.
Then (`isolation`, issue 33) the first master stops and a second one starts on the same cluster as root with
`--trial-user`: alice's and bob's trials run as their linked OS accounts in a bubblewrap sandbox on their nodes;
alice's trial tries bob's checkpoint, the master's data dir and database, and bob's /tmp (what it saw is recorded;
a failure of this phase is recorded too, not the scenario's).
SCENARIO `failover` (1 CPU per node): a 2-slot trial with one rank per node (gloo across nodes), a 2-slot
script under `determined.launch.torch_distributed` with one container per node, `det agent disable` of the second node
while a trial runs there (it checkpoints and resumes on the head), then the second node killed while a trial runs
there.

A busy machine makes each step slower, not wrong: every wait goes on while the master's trials move (states,
batches, checkpoints, restarts) and gives up only when nothing has moved for its timeout times the load per core
(tests/_patience.py); the test's outer guard (tests/ray/test_ray_rm.py) likewise only ends a scenario that has
stopped writing anything.
"""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time
import traceback
from typing import Any, Callable, Dict, List, Optional

import yaml

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))  # the repository: tests/_patience.py (this runs as a script)
from tests import _patience  # noqa: E402
BIN = pathlib.Path(sys.executable).parent
RAY_PORT = 6390
MASTER_PORT = 18080
MASTER = f"http://127.0.0.1:{MASTER_PORT}"
T0 = time.monotonic()


def log(message: str) -> None:
    print(f"[scenario {time.monotonic() - T0:6.1f}s] {message}", flush=True)


def wait_for(what: Callable[[], Any], timeout: float, message: str, interval: float = 0.25,
             progress: Optional[Callable[[], Any]] = None) -> Any:
    """Poll `what()` until true. It fails only when nothing has moved for `timeout` s times the machine's load
    factor (tests/_patience.py): `progress` (default: the master's trials, once it serves) is what moves."""
    if progress is None and _SESSION:
        progress = master_progress
    return _patience.wait_for(what, timeout, message, progress=progress, interval=interval)


def det(*args: str, check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(BIN / "det"), *args], capture_output=True, text=True,
                          timeout=_patience.scaled(timeout))
    if check and proc.returncode != 0:
        raise AssertionError(f"det {' '.join(args)} failed ({proc.returncode}): {proc.stdout}\n{proc.stderr}")
    return proc


def ray_start(*args: str, block: bool = False, prefix: Optional[List[str]] = None) -> "subprocess.Popen[bytes]":
    command = [str(BIN / "ray"), "start", *args, "--node-ip-address", "127.0.0.1", "--disable-usage-stats",
               "--object-store-memory", str(100 * 1024 * 1024)]
    if block:
        command.append("--block")
    return subprocess.Popen([*(prefix or []), *command], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def descendants(root: int) -> List[int]:
    children: Dict[int, List[int]] = {}
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            found.append(child)
            todo.append(child)
    return found


def kill_tree(root: int) -> int:
    """SIGKILL `root` and every process under it (by parent links, sessions notwithstanding)."""
    killed = set()
    for _ in range(3):
        pids = [root, *descendants(root)]
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    return len(killed)


class Cluster:
    def __init__(self, root: pathlib.Path, cpus: int, private_dir: Optional[pathlib.Path]) -> None:
        self.root = root
        self.temp = pathlib.Path(f"/tmp/rt{os.getpid()}-{int(time.time()) % 100000}")
        common = ["--num-cpus", str(cpus), "--temp-dir", str(self.temp)]
        started = time.monotonic()
        head = ray_start("--head", "--port", str(RAY_PORT), "--include-dashboard=false",
                         "--resources", json.dumps({"det_head": 1}), *common)
        _, err = head.communicate(timeout=_patience.scaled(300))
        if head.returncode != 0:
            raise AssertionError(f"ray start --head failed: {err.decode()[-2000:]}")
        prefix = None
        if private_dir is not None:  # this node sees its own, empty DIR/private: not the master's directory
            prefix = ["unshare", "-m", "sh", "-c", f'mount -t tmpfs tmpfs {private_dir} && exec "$0" "$@"']
        self.node2 = ray_start("--address", f"127.0.0.1:{RAY_PORT}", "--resources", json.dumps({"det_node2": 1}),
                               *common, block=True, prefix=prefix)
        import ray

        ray.init(address=f"127.0.0.1:{RAY_PORT}", namespace="scenario", log_to_driver=False,
                 logging_level="WARNING")
        self.ray = ray
        wait_for(lambda: len(self.alive()) == 2, 300, "the second Ray node")
        self.head_id = next(n["NodeID"] for n in self.alive() if "det_head" in n["Resources"])
        self.node2_id = next(n["NodeID"] for n in self.alive() if "det_node2" in n["Resources"])
        self.seconds = time.monotonic() - started
        log(f"Ray cluster up in {self.seconds:.1f} s: head {self.head_id[:8]}, node2 {self.node2_id[:8]}")

    def alive(self) -> List[Dict[str, Any]]:
        return [n for n in self.ray.nodes() if n.get("Alive")]

    def live_placement_groups(self) -> List[Dict[str, Any]]:
        return [pg for pg in self.ray.util.placement_group_table().values() if pg.get("state") != "REMOVED"]

    def released(self) -> bool:
        total = self.ray.cluster_resources().get("CPU", 0)
        return not self.live_placement_groups() and self.ray.available_resources().get("CPU", 0) == total


def start_master(data_dir: pathlib.Path, *more: str, port: int = MASTER_PORT,
                 roots: Optional[List[str]] = None) -> "subprocess.Popen[str]":
    out = open(data_dir.parent / "master.log", "w")
    # The checkpoint directories of the scenarios are the master's storage roots (a server refuses others).
    if roots is None:
        roots = [arg for name in ("shared", "private")
                 for arg in ("--allowed-storage-root", str(data_dir.parent / name))]
    proc = subprocess.Popen([str(BIN / "det"), "master", "up", "--resource-manager", "ray", "--ray-address",
                             f"127.0.0.1:{RAY_PORT}", "--port", str(port), "--data-dir", str(data_dir), *roots, *more],
                            stdout=out, stderr=subprocess.STDOUT, text=True)
    wait_for(lambda: "Master serving at" in (data_dir.parent / "master.log").read_text() or proc.poll() is not None,
             300, "the master")
    if proc.poll() is not None:
        raise AssertionError("det master up exited: " + (data_dir.parent / "master.log").read_text()[-3000:])
    return proc


def python_for_other_users(root: pathlib.Path) -> None:
    """Where this Python lives in root's private home (pyenv in /root), make /root (in this scenario's mount
    namespace: the Ray nodes started after inherit it) a tmpfs that lets other users through to that Python only."""
    parts = pathlib.Path(os.path.realpath(sys.executable)).parts
    if parts[:2] != ("/", "root") or len(parts) < 3:
        return
    kept, hold = f"/root/{parts[2]}", root / "ns-python"
    hold.mkdir()
    for command in (["mount", "--bind", kept, str(hold)], ["mount", "-t", "tmpfs", "-o", "mode=0755", "tmpfs", "/root"],
                    ["mkdir", kept], ["mount", "--bind", str(hold), kept]):
        subprocess.run(command, check=True)


def write_experiment(root: pathlib.Path, name: str, config: Dict[str, Any]) -> pathlib.Path:
    model_dir = root / "model"
    if not model_dir.exists():
        model_dir.mkdir()
        shutil.copy(HERE / "_ray_trials.py", model_dir / "_ray_trials.py")
    path = root / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def config(storage: pathlib.Path, *, trials: int = 1, batches: int = 20, sleep: float = 0.05, slots: int = 1,
           restarts: int = 3) -> Dict[str, Any]:
    searcher: Dict[str, Any] = {"name": "random", "metric": "val_loss", "max_length": {"batches": batches},
                                "max_trials": trials}
    if trials == 1:
        searcher = {"name": "single", "metric": "val_loss", "max_length": {"batches": batches}}
    return {
        "entrypoint": "_ray_trials:RayTestTrial",
        "hyperparameters": {"global_batch_size": 8, "lr": {"type": "double", "minval": 0.01, "maxval": 0.1},
                            "sleep": sleep},
        "searcher": searcher,
        "min_checkpoint_period": {"batches": 5},
        "resources": {"slots_per_trial": slots},
        "max_restarts": restarts,
        "checkpoint_storage": {"type": "shared_fs", "host_path": str(storage)},
    }


def created_id(proc: subprocess.CompletedProcess) -> int:
    """The id `det experiment create` printed ("Created experiment N")."""
    return int(proc.stdout.split("Created experiment ", 1)[1].split()[0])


def create(root: pathlib.Path, name: str, cfg: Dict[str, Any], check: bool = True) -> subprocess.CompletedProcess:
    path = write_experiment(root, name, cfg)
    return det("experiment", "create", "-d", str(path), str(root / "model"), check=check)


_SESSION: List[Any] = []


def api() -> Any:
    """A REST session on the master (reads poll through it: a `det` process per poll costs a core-second)."""
    if not _SESSION:
        from determined.common.api import Session

        _SESSION.append(Session(MASTER))
    return _SESSION[0]


def master_progress() -> Any:
    """What the master's experiments and trials have done so far: it changes while any of them starts, trains,
    checkpoints, restarts or ends (a wait on one of them goes on while it does, however slow the machine)."""
    try:
        _PROGRESS[:] = [[(e["id"], e["state"], [(t["id"], t["state"], t["total_batches"], t["restarts"],
                                                  t.get("latest_checkpoint_uuid")) for t in trials_of(e["id"])])
                         for e in api().get("/experiments")["experiments"]]]
    except Exception:  # a master too busy (or gone) to answer this poll: nothing seen to move
        pass
    return _PROGRESS[0] if _PROGRESS else None


_PROGRESS: List[Any] = []


def trials_of(exp_id: int) -> List[Dict[str, Any]]:
    return list(api().get(f"/experiments/{exp_id}")["trials"])


def exp_state(exp_id: int) -> str:
    return str(api().get(f"/experiments/{exp_id}")["experiment"]["state"])


def logs(trial_id: int) -> List[str]:
    lines: List[str] = []
    offset = 0
    while True:
        page = api().get(f"/trials/{trial_id}/logs?offset={offset}&limit=5000")
        lines += [entry["message"] for entry in page["logs"]]
        if not page["logs"]:
            return lines
        offset = page["next_offset"]


def runs_in_logs(lines: List[str]) -> List[Dict[str, Any]]:
    """Each run of the trial as the Ray RM logged it: rank placements, then the batches it trained."""
    runs: List[Dict[str, Any]] = []
    for line in lines:
        if "[ray] run " in line and " on node " in line:
            alloc = line.split("[ray] run ", 1)[1].split(":", 1)[0]
            node = line.rsplit("(node id ", 1)[1].rstrip(")")
            rank = int(line.split(": rank ", 1)[1].split()[0])
            if not runs or runs[-1]["allocation"] != alloc:
                runs.append({"allocation": alloc, "nodes": {}, "batches": []})
            runs[-1]["nodes"][rank] = node
        elif "[det-test] batch " in line and runs:
            runs[-1]["batches"].append(int(line.rsplit("[det-test] batch ", 1)[1].split()[0]))
    return runs


def wait_experiment(exp_id: int, timeout: float) -> str:
    return wait_for(lambda: (lambda s: s if s in ("COMPLETED", "CANCELED", "ERROR") else None)(exp_state(exp_id)),
                    timeout, f"experiment {exp_id} to end", interval=1.0)


def cluster_slots() -> Dict[str, Any]:
    return dict(api().get("/cluster/slots"))


def spread(root: pathlib.Path, out: Dict[str, Any]) -> None:
    private, shared = root / "private", root / "shared"
    private.mkdir()
    shared.mkdir()
    python_for_other_users(root)  # for the isolation phase's trials, which run as other OS accounts
    cluster = Cluster(root, cpus=2, private_dir=private)
    out["nodes"] = {"head": cluster.head_id, "node2": cluster.node2_id}
    out["ray_temp"] = str(cluster.temp)
    out["seconds"] = {"cluster": cluster.seconds}
    t = time.monotonic()
    master = start_master(root / "data")
    out["seconds"]["master"] = time.monotonic() - t
    out["master_log_head"] = (root / "master.log").read_text()[:12000]  # the start-up lines follow the migrations' notes
    out["slots"] = cluster_slots()

    # e: submissions that cannot work on this cluster
    t = time.monotonic()
    bad_storage = create(root, "bad_storage", config(private), check=False)
    too_big = create(root, "too_big", config(shared, slots=5), check=False)
    out["bad_storage"] = {"rc": bad_storage.returncode, "output": bad_storage.stdout + bad_storage.stderr}
    out["too_big"] = {"rc": too_big.returncode, "output": too_big.stdout + too_big.stderr}
    out["experiments_after_refusals"] = api().get("/experiments")["experiments"]
    out["seconds"]["refusals"] = time.monotonic() - t
    log(f"refusals: rc {bad_storage.returncode}, {too_big.returncode}")

    # a: 6 trials of 1 slot over both nodes' 4 slots: the last 2 start in finished runs' actors (reuse)
    t = time.monotonic()
    create(root, "four", config(shared, trials=6, batches=20, sleep=0.05))
    exp_id = 1
    seen_nodes = set()

    def spread_seen() -> bool:
        for a in cluster_slots()["allocations"]:
            seen_nodes.update(a.get("nodes") or [])
        return exp_state(exp_id) in ("COMPLETED", "ERROR", "CANCELED")

    wait_for(spread_seen, 240, "the 4-trial experiment", interval=1.0)
    out["four"] = {"state": exp_state(exp_id), "trials": trials_of(exp_id),
                   "checkpoints": api().get(f"/experiments/{exp_id}/checkpoints")["checkpoints"],
                   "runs": {t["id"]: runs_in_logs(logs(t["id"])) for t in trials_of(exp_id)},
                   "reuses": (root / "master.log").read_text().count("reuses the placement group and actors"),
                   "made_ready": (root / "master.log").read_text().count("takes a placement group made ready at start")}
    out["seconds"]["four_trials"] = time.monotonic() - t
    log(f"6 trials: {out['four']['state']} in {out['seconds']['four_trials']:.1f} s")
    wait_for(cluster.released, 20, "the resources of the finished experiment")

    # d: pause releases, activate resumes from the checkpoint, kill releases
    t = time.monotonic()
    create(root, "pause", config(shared, batches=400, sleep=0.05))
    exp_id = 2
    trial_id = wait_for(lambda: (trials_of(exp_id) or [None])[0], 60, "the trial")["id"]
    wait_for(lambda: trials_of(exp_id)[0].get("latest_checkpoint_uuid"), 120, "a checkpoint")
    out["pause_held_pgs"] = len(cluster.live_placement_groups())
    det("experiment", "pause", str(exp_id))
    wait_for(lambda: not cluster_slots()["allocations"], 90, "the paused trial to stop")
    wait_for(cluster.released, 30, "the paused trial's placement group to go")
    out["paused"] = {"live_pgs": len(cluster.live_placement_groups()), "available": cluster.ray.available_resources(),
                     "total": cluster.ray.cluster_resources(), "state": exp_state(exp_id)}
    paused_at = trials_of(exp_id)[0]
    activated = det("experiment", "activate", str(exp_id), check=False)  # its exit code tells the state
    assert "Activated experiment" in activated.stdout, activated.stdout + activated.stderr
    wait_for(lambda: len(runs_in_logs(logs(trial_id))) >= 2 and runs_in_logs(logs(trial_id))[-1]["batches"], 120,
             "the resumed run to train")
    det("experiment", "kill", str(exp_id))
    wait_experiment(exp_id, 60)
    wait_for(cluster.released, 30, "the killed trial's placement group to go")
    out["pause"] = {"trial_at_pause": paused_at, "runs": runs_in_logs(logs(trial_id)), "state": exp_state(exp_id),
                    "live_pgs_after_kill": len(cluster.live_placement_groups()),
                    "available_after_kill": cluster.ray.available_resources(),
                    "total": cluster.ray.cluster_resources()}
    out["seconds"]["pause_activate_kill"] = time.monotonic() - t

    t = time.monotonic()
    try:
        out["tasks"] = tasks_on_node2(cluster)
    except BaseException as e:  # recorded for the tasks' test; the other tests of the scenario stand
        out["tasks"] = {"error": f"{e.__class__.__name__}: {e}\n{traceback.format_exc()}"}
        det("-u", "admin", "agent", "enable", cluster.head_id, check=False)
    out["seconds"]["tasks"] = time.monotonic() - t
    log(f"tasks on node2: {out['seconds']['tasks']:.1f} s")

    t = time.monotonic()
    master.send_signal(signal.SIGTERM)
    master.wait(timeout=_patience.scaled(60))
    try:
        out["isolation"] = isolation(cluster)
    except BaseException as e:  # recorded for the isolation test; the other tests of the scenario stand
        out["isolation"] = {"error": f"{e.__class__.__name__}: {e}\n{traceback.format_exc()}"}
    out["seconds"]["isolation"] = time.monotonic() - t


def tasks_on_node2(cluster: "Cluster") -> Dict[str, Any]:
    """Issue 31 on Ray: with the head disabled (`--drain`: no new run goes there), alice's command and notebook are
    placed on node2 (rm/ray_tasks.py); the notebook is reached through the master's proxy by alice, not by bob;
    killing it frees its slot."""
    import urllib.error
    import urllib.request

    from determined.common.api import Session

    admin = Session(MASTER, user="admin")
    for who in ("alice", "bob"):
        admin.post("/users", {"username": who, "password": ""})
    alice, bob = Session(MASTER, user="alice"), Session(MASTER, user="bob")
    bob.get("/me")  # logs in: its token below
    det("-u", "admin", "agent", "disable", "--drain", cluster.head_id)
    result: Dict[str, Any] = {}

    def task(task_id: str) -> Dict[str, Any]:
        return dict(alice.get(f"/tasks/{task_id}")["task"])

    def task_logs(task_id: str) -> List[str]:
        return [line["message"] for line in alice.get(f"/tasks/{task_id}/logs", {"limit": 1000})["logs"]]

    def proxy_status(task_id: str, token: str) -> Any:
        request = urllib.request.Request(f"{MASTER}/proxy/{task_id}/api/status",
                                         headers={"Authorization": f"Bearer {token}"})
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 (the namespace's master)
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")[:300]

    command = alice.post("/commands", {"config": {"entrypoint": "echo ray-task-says $DET_TASK_TYPE",
                                                  "resources": {"slots": 1}}})["task"]["id"]
    wait_for(lambda: task(command)["state"] == "STATE_TERMINATED", 180, "the command on node2", interval=0.5)
    result["command"] = {"task": task(command), "logs": task_logs(command)}
    notebook = alice.post("/notebooks", {"config": {"resources": {"slots": 1}}})["task"]["id"]
    wait_for(lambda: task(notebook)["state"] in ("STATE_RUNNING", "STATE_TERMINATED"), 300, "the notebook to answer",
             interval=0.5)
    result["notebook"] = {"running": task(notebook), "alice": proxy_status(notebook, str(alice.token)),
                          "bob": proxy_status(notebook, str(bob.token)),
                          "node2_slots": admin.get(f"/agents/{cluster.node2_id}/slots")["slots"],
                          "pools_running": admin.get("/resource-pools")["resource_pools"]}
    alice.post(f"/tasks/{notebook}/kill", {})
    wait_for(lambda: task(notebook)["state"] == "STATE_TERMINATED", 120, "the killed notebook to end", interval=0.5)
    wait_for(cluster.released, 60, "the notebook's placement group to go")
    result["notebook"].update({"ended": task(notebook), "logs": task_logs(notebook),
                               "node2_slots_after": admin.get(f"/agents/{cluster.node2_id}/slots")["slots"],
                               "pools_after": admin.get("/resource-pools")["resource_pools"]})
    det("-u", "admin", "agent", "enable", cluster.head_id)
    return result


BOB = r'''
import os, pathlib, time
import determined as det

pathlib.Path("/tmp/bob-tmp-secret").write_text("bob's temporary file")
with det.core.init() as core:
    for op in core.searcher.operations():
        for text in ("bob-c1", "bob-c2"):
            with core.checkpoint.store_path({"steps_completed": op.length, "which": text}) as (path, _):
                (path / "weights").write_text(text)
        print("BOB WAITING", flush=True)
        for _ in range(12000):  # until alice's trial is done (at most 20 minutes: a busy machine's)
            if os.path.exists("/mnt/signals/go"):
                break
            time.sleep(0.1)
        core.train.report_validation_metrics(steps_completed=op.length, metrics={"loss": 0.5})
        op.report_completed(0.5)
'''

ALICE = r'''
import glob, json, os
import determined as det

found = {"uid": os.getuid(), "node": os.environ.get("DET_RAY_NODE_ID")}


def attempt(name, action):
    try:
        found[name] = action()
    except OSError as e:
        found[name] = type(e).__name__


data_dir, storage = os.environ["DATA_DIR"], os.environ["STORAGE"]
attempt("bob_checkpoint", lambda: open(os.path.join(storage, os.environ["BOB_PRIVATE"], "weights")).read())
attempt("read_db", lambda: open(os.path.join(data_dir, "determined.db"), "rb").read(16).decode("latin-1"))
attempt("list_data_dir", lambda: sorted(os.listdir(data_dir)))
attempt("bob_tmp", lambda: open("/tmp/bob-tmp-secret").read())
attempt("bob_tmp_on_node", lambda: [open(p).read() for p in glob.glob("/run/determined-ray/*/.tmp/bob-tmp-secret")])
with det.core.init() as core:
    with core.checkpoint.restore_path(det.get_cluster_info().latest_checkpoint) as path:
        found["source"] = (path / "weights").read_text()
    for op in core.searcher.operations():
        with core.checkpoint.store_path({"steps_completed": op.length}) as (path, _):
            (path / "weights").write_text("alice")
        core.train.report_validation_metrics(steps_completed=op.length, metrics={"loss": 0.25})
        op.report_completed(0.25)
print("ALICE " + json.dumps(found), flush=True)
'''


def isolation(cluster: "Cluster") -> Dict[str, Any]:
    """Alice's and bob's trials as their OS accounts, sandboxed on the Ray nodes (see the module)."""
    import pwd
    import tempfile

    from determined.common import context as det_context
    from determined.common.api import Session

    base = pathlib.Path(tempfile.mkdtemp(prefix="det-ray-iso-", dir="/tmp"))  # every account may pass through
    os.chmod(base, 0o711)
    names = {who: f"detray{who}{os.getpid()}{int(time.time()) % 10000}" for who in ("default", "alice", "bob")}
    made: List[str] = []
    result: Dict[str, Any] = {}
    try:
        for name in names.values():
            subprocess.run(["useradd", "--system", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin",
                            name], check=True)
            made.append(name)
        ids = {who: (pwd.getpwnam(n).pw_uid, pwd.getpwnam(n).pw_gid) for who, n in names.items()}
        result["ids"] = ids
        signals = base / "signals"
        signals.mkdir(mode=0o755)
        data_dir = base / "data"
        os.environ["DET_RAY_WARM_SLOTS"] = "0"
        proc = start_master(data_dir, "--trial-user", names["default"], port=MASTER_PORT + 1, roots=[])
        url = f"http://127.0.0.1:{MASTER_PORT + 1}"
        try:
            result["master_log_head"] = (base / "master.log").read_text()[:12000]
            admin = Session(url, user="admin")
            for who in ("alice", "bob"):
                admin.post("/users", {"username": who, "password": ""})
                uid, gid = ids[who]
                link = {"agent_uid": uid, "agent_gid": gid, "agent_user": names[who], "agent_group": names[who]}
                admin.patch(f"/users/{who}", {"agent_user_group": link})
            sessions = {who: Session(url, user=who) for who in ("alice", "bob")}

            def submit(who: str, script: str, env: Dict[str, str], **more: Any) -> int:
                model = base / f"model-{who}"
                model.mkdir()
                (model / f"{who}.py").write_text(script)
                searcher = {"name": "single", "metric": "loss", "max_length": {"batches": 1},
                            **more.pop("searcher", {})}
                config = {"searcher": searcher, "hyperparameters": {"global_batch_size": 1}, "max_restarts": 0,
                          "environment": {"environment_variables": [f"{k}={v}" for k, v in env.items()]},
                          "internal": {"native": {"command": [f"{who}.py"]}}, **more}
                package = det_context.pack_model_dir_b64(str(model))
                answer = sessions[who].post("/experiments", {"config": config, "model_definition": package})
                return int(answer["experiment"]["id"])

            def state(exp_id: int) -> str:
                return str(admin.get(f"/experiments/{exp_id}")["experiment"]["state"])

            def checkpoints(exp_id: int) -> List[Dict[str, Any]]:
                return [c for c in admin.get(f"/experiments/{exp_id}/checkpoints")["checkpoints"]
                        if c["state"] == "COMPLETED"]

            def trial_logs(exp_id: int) -> List[str]:
                trial_id = admin.get(f"/experiments/{exp_id}")["trials"][0]["id"]
                return [e["message"] for e in admin.get(f"/trials/{trial_id}/logs", {"limit": 1000})["logs"]]

            bob_exp = submit("bob", BOB, {}, bind_mounts=[{"host_path": str(signals), "container_path": "/mnt/signals",
                                                           "read_only": True}])
            wait_for(lambda: len(checkpoints(bob_exp)) == 2 or state(bob_exp) != "ACTIVE", 120, "bob's checkpoints")
            by_text = {c["metadata"]["which"]: c["uuid"] for c in checkpoints(bob_exp)}
            storage = data_dir / "checkpoints"
            alice_exp = submit("alice", ALICE, {"DATA_DIR": str(data_dir), "STORAGE": str(storage),
                                                "BOB_PRIVATE": by_text["bob-c2"]},
                               searcher={"source_checkpoint_uuid": by_text["bob-c1"]})
            wait_for(lambda: state(alice_exp) in ("COMPLETED", "ERROR"), 120, "alice's trial")
            (signals / "go").write_text("")
            wait_for(lambda: state(bob_exp) in ("COMPLETED", "ERROR"), 120, "bob's trial")
            lines = trial_logs(alice_exp)
            result.update({"alice_state": state(alice_exp), "bob_state": state(bob_exp), "alice_logs": lines[-60:],
                           "bob_logs": trial_logs(bob_exp)[-30:], "bob_node_lines": [
                               line for line in trial_logs(bob_exp) if "[ray] run " in line and " on node " in line]})
            result["found"] = next((json.loads(line.split("ALICE ", 1)[1]) for line in lines if "ALICE {" in line),
                                   None)
            owners = {}
            for who, exp_id in (("alice", alice_exp), ("bob", bob_exp)):
                for checkpoint in checkpoints(exp_id):
                    st = (storage / checkpoint["uuid"] / "weights").stat()
                    owners[checkpoint["uuid"]] = [who, st.st_uid, st.st_gid, st.st_mode & 0o777]
            result["owners"] = owners
            result["master_log"] = (base / "master.log").read_text()[-8000:]
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=_patience.scaled(60))
    finally:
        for name in made:
            shutil.rmtree(f"/run/determined-ray/.home-{pwd.getpwnam(name).pw_uid}", ignore_errors=True)
            subprocess.run(["userdel", name], check=False)
            subprocess.run(["groupdel", name], check=False, capture_output=True)
        shutil.rmtree(base, ignore_errors=True)
    return result


def failover(root: pathlib.Path, out: Dict[str, Any]) -> None:
    shared = root / "shared"
    shared.mkdir()
    cluster = Cluster(root, cpus=1, private_dir=None)
    out["nodes"] = {"head": cluster.head_id, "node2": cluster.node2_id}
    out["ray_temp"] = str(cluster.temp)
    out["seconds"] = {"cluster": cluster.seconds}
    start_master(root / "data")

    # c: a 2-slot trial with one rank per node
    t = time.monotonic()
    create(root, "ddp", config(shared, batches=10, sleep=0.05, slots=2))
    state = wait_experiment(1, 600)
    trial = trials_of(1)[0]
    out["ddp"] = {"state": state, "trial": trial, "logs": logs(trial["id"])}
    out["seconds"]["ddp"] = time.monotonic() - t
    log(f"2-slot trial: {state} in {out['seconds']['ddp']:.1f} s")
    wait_for(cluster.released, 120, "the resources of the 2-slot trial")

    # f: a 2-slot script under determined.launch.torch_distributed, one container (and rank) per node
    t = time.monotonic()
    script_model = root / "script_model"
    script_model.mkdir()
    shutil.copy(HERE.parent / "launch" / "scripts" / "ddp.py", script_model / "ddp.py")
    script_config = root / "script.yaml"
    script_config.write_text(yaml.safe_dump({
        "entrypoint": "python3 -m determined.launch.torch_distributed python3 ddp.py",
        "hyperparameters": {"steps": 20}, "searcher": {"name": "single", "metric": "loss", "max_length": 1},
        "resources": {"slots_per_trial": 2}, "max_restarts": 0,
        "checkpoint_storage": {"type": "shared_fs", "host_path": str(shared)}}))
    det("experiment", "create", "-d", str(script_config), str(script_model))
    state = wait_experiment(2, 600)
    trial = trials_of(2)[0]
    out["script"] = {"state": state, "trial": trial, "logs": logs(trial["id"])}
    out["seconds"]["script"] = time.monotonic() - t
    log(f"2-slot torch_distributed script: {state} in {out['seconds']['script']:.1f} s")
    wait_for(cluster.released, 120, "the resources of the script")

    # g: disabling a node moves its trial to the other node through a checkpoint (issue 32)
    t = time.monotonic()
    try:
        out["drain"] = drain(root, cluster, shared)
    except BaseException as e:  # recorded for the drain test; the failover phase still runs (on both nodes)
        out["drain"] = {"error": f"{e.__class__.__name__}: {e}\n{traceback.format_exc()}", "state": "?"}
        for node in (cluster.head_id, cluster.node2_id):
            det("-u", "admin", "agent", "enable", node, check=False)
    out["seconds"]["drain"] = time.monotonic() - t
    log(f"disable a node: {out['drain']['state']} in {out['seconds']['drain']:.1f} s")

    # b: the second node dies while a trial runs there
    t = time.monotonic()
    length = 160
    exp_id = created_id(create(root, "failover", config(shared, trials=2, batches=length, sleep=0.05, restarts=3)))

    def on_node2_with_checkpoint() -> Optional[Dict[str, Any]]:
        for trial in trials_of(exp_id):
            runs = runs_in_logs(logs(trial["id"]))
            if trial.get("latest_checkpoint_uuid") and runs and runs[-1]["nodes"].get(0) == cluster.node2_id:
                return trial
        return None

    victim = wait_for(on_node2_with_checkpoint, 600, "a trial with a checkpoint on the second node", interval=0.5)
    before = runs_in_logs(logs(victim["id"]))[-1]["batches"]
    killed = kill_tree(cluster.node2.pid)
    killed_at = time.monotonic()
    # What the master had of the lost run (its reports and checkpoints reach the master directly, its log
    # lines through the node, which may not have sent the last ones), read before Ray notices the loss.
    at_kill = next(t for t in trials_of(exp_id) if t["id"] == victim["id"])
    log(f"killed {killed} processes of the second node; trial {victim['id']} had trained {max(before or [0])} batches")
    state = wait_experiment(exp_id, 600)
    out["failover"] = {"state": state, "victim": victim["id"], "killed_processes": killed,
                       "trials": trials_of(exp_id), "length": length, "batches_at_kill": at_kill["total_batches"],
                       "runs": {t["id"]: runs_in_logs(logs(t["id"])) for t in trials_of(exp_id)},
                       "recovery_seconds": time.monotonic() - killed_at,
                       "alive_nodes": [n["NodeID"] for n in cluster.alive()]}
    out["seconds"]["failover"] = time.monotonic() - t
    log(f"failover: {state} in {out['seconds']['failover']:.1f} s")


def drain(root: pathlib.Path, cluster: "Cluster", shared: pathlib.Path) -> Dict[str, Any]:
    """The head disabled with --drain (nothing runs there): the trial starts on node2, slow there; once it has a
    checkpoint the head is enabled and node2 disabled (no --drain): the trial checkpoints through the preemption
    signal and finishes on the head."""
    result: Dict[str, Any] = {"agents": json.loads(det("agent", "list", "--json").stdout)}
    refused = det("agent", "disable", cluster.head_id, check=False)  # the default user is no admin
    result["non_admin"] = {"rc": refused.returncode, "output": refused.stdout + refused.stderr}
    det("-u", "admin", "agent", "disable", "--drain", cluster.head_id)
    result["agents_head_disabled"] = json.loads(det("agent", "list", "--json").stdout)
    length = 60
    cfg = config(shared, batches=length, sleep=0.02, restarts=0)
    cfg["hyperparameters"].update({"slow_node": cluster.node2_id, "slow_sleep": 0.5})
    cfg["scheduling_unit"] = 5
    exp_id = created_id(create(root, "drain", cfg))

    def on_node2_with_checkpoint() -> Optional[Dict[str, Any]]:
        trial = (trials_of(exp_id) or [None])[0]
        runs = runs_in_logs(logs(trial["id"])) if trial else []
        if trial and trial.get("latest_checkpoint_uuid") and runs and runs[-1]["nodes"].get(0) == cluster.node2_id:
            return trial
        return None

    trial = wait_for(on_node2_with_checkpoint, 240, "the trial to checkpoint on node2", interval=0.5)
    det("-u", "admin", "agent", "enable", cluster.head_id)
    moved = det("-u", "admin", "agent", "disable", cluster.node2_id)
    result["disable_output"] = moved.stdout
    result["agents_node2_disabled"] = json.loads(det("agent", "list", "--json").stdout)
    result["state"] = wait_experiment(exp_id, 300)
    det("-u", "admin", "agent", "enable", cluster.node2_id)
    lines = logs(trial["id"])
    result.update({"trial": trials_of(exp_id)[0], "length": length, "runs": runs_in_logs(lines),
                   "notes": [line for line in lines if "was disabled" in line], "logs": lines[-80:]})
    wait_for(cluster.released, 120, "the resources of the moved trial")
    return result


def main() -> int:
    scenario, out_path, root = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
    if os.getpid() != 1:
        print("run me as PID 1 of a private namespace (see the docstring)", file=sys.stderr)
        return 2
    os.environ["DET_MASTER"] = MASTER
    os.environ["XDG_CONFIG_HOME"] = str(root / "config")  # the client's token cache, private to this run
    os.environ["DET_RAY_CHECK_TIMEOUT_S"] = "60"  # the storage check's first Ray workers start on a busy machine
    # Ray notices a dead node after health_check_failure_threshold missed checks (default 5 x 3 s).
    # A busy machine's raylet may take seconds to answer: a check times out after 3 s times the load factor (a
    # live node must not be declared dead because the machine is busy), and 5 missed ones in a row mark a node dead
    # (~20 s on a quiet machine).
    os.environ.update({"RAY_health_check_period_ms": "1000",
                       "RAY_health_check_timeout_ms": str(int(3000 * _patience.load_factor())),
                       "RAY_health_check_failure_threshold": "5"})
    out: Dict[str, Any] = {"scenario": scenario}
    try:
        {"spread": spread, "failover": failover}[scenario](root, out)
        out["ok"] = True
    except BaseException as e:  # the test reads the failure from the JSON
        out["ok"] = False
        out["error"] = f"{e.__class__.__name__}: {e}\n{traceback.format_exc()}"
        log(out["error"])
    master_log = root / "master.log"
    if master_log.exists():
        out["master_log_tail"] = master_log.read_text()[-6000:]
    out["total_seconds"] = time.monotonic() - T0
    out_path.write_text(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
