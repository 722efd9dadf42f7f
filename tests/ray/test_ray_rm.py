"""The Ray resource manager against a real Ray cluster of two nodes, in a private network and PID namespace.

Each scenario (tests/ray/_ray_scenario.py) runs once as PID 1 of `unshare -n -p -f --mount-proc`: every
Ray process, the master and the trials it started end with it. The tests here read what it recorded.
Ray runs with token authentication: each scenario gets a fresh `RAY_AUTH_TOKEN` (with `RAY_AUTH_MODE=token` and no
token, `ray start --head` exits 1; docs/ray.md says how a cluster's token is provided).
"""
import json
import os
import pathlib
import secrets
import shutil
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

from tests import _patience

HERE = pathlib.Path(__file__).resolve().parent
# Only guards against a hang: each step of a scenario waits on its own progress (tests/_patience.py; a busy machine,
# load 10-20 on 2 cores, makes a scenario several times slower than the ~3 minutes it takes on a quiet one). A
# scenario is given up when nothing it writes (its output, the master's log, its data dir) has changed for
# SCENARIO_QUIET_S x the load factor; SCENARIO_TIMEOUT_S caps it in all (pytest-timeout's 600 s is per test).
SCENARIO_QUIET_S = 600
SCENARIO_TIMEOUT_S = 4 * 3600
pytestmark = pytest.mark.timeout(SCENARIO_TIMEOUT_S + 300)
DET = str(pathlib.Path(sys.executable).parent / "det")


def _namespaces_usable() -> str:
    if os.geteuid() != 0:
        return "needs root for `unshare -n -p -f --mount-proc` (a private network and PID namespace)"
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "needs `unshare` (util-linux) and `ip` (iproute2)"
    probe = subprocess.run(["unshare", "-n", "-p", "-f", "--mount-proc", "true"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"`unshare -n -p -f --mount-proc` is not allowed here: {probe.stderr.strip()}"
    return ""


SKIP_REASON = _namespaces_usable()
needs_namespaces = pytest.mark.skipif(bool(SKIP_REASON), reason=SKIP_REASON)
pytest.importorskip("ray", reason="the Ray resource manager needs `pip install 'determined-revived[ray]'`")


def in_namespace(script: str, env: Dict[str, str], timeout: float,
                 moving: Optional[Callable[[], Any]] = None) -> "subprocess.CompletedProcess[str]":
    """Run `sh -c script` as PID 1 of a private network and PID namespace. Give up (subprocess.TimeoutExpired) when
    `moving()` has not changed for `timeout` s x the load factor (without `moving`: `timeout` x the load factor in
    all), or after SCENARIO_TIMEOUT_S. `--kill-child`: when giving up kills `unshare`, its PID 1 (and so the
    namespace: the Ray nodes, the master, the trials) is killed with it, instead of going on loading the machine
    after the test gave up on it."""
    argv = ["unshare", "-n", "-p", "-f", "--mount-proc", "--kill-child", "sh", "-c", script]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started = moved_at = time.monotonic()
    last, factor = None, _patience.load_factor()
    try:
        while True:
            try:
                stdout, stderr = proc.communicate(timeout=1.0)
                return subprocess.CompletedProcess(argv, proc.returncode, stdout, stderr)
            except subprocess.TimeoutExpired:
                pass
            now, seen = time.monotonic(), moving() if moving else None
            if seen != last:
                last, moved_at = seen, now
            factor = max(factor, _patience.load_factor())
            if now - moved_at > timeout * factor or now - started > SCENARIO_TIMEOUT_S:
                proc.kill()
                stdout, stderr = proc.communicate()
                raise subprocess.TimeoutExpired(argv, now - started, stdout, stderr)
    finally:  # whatever ended the wait (a failing check, Ctrl-C), the namespace ends with it
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _written(root: pathlib.Path) -> Tuple[int, int]:
    """How much a scenario has written so far (files and bytes under its directory: the master's log, its database
    and its checkpoints grow while anything happens)."""
    files = size = 0
    for folder, _, names in os.walk(root):  # a folder removed during the walk (checkpoint GC) is skipped
        for name in names:
            try:
                size += os.lstat(os.path.join(folder, name)).st_size
                files += 1
            except OSError:  # gone meanwhile
                pass
    return files, size


def run_scenario(name: str, tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    root = tmp_path_factory.mktemp(f"ray-{name}")
    out = root / "out.json"
    env = dict(os.environ, RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=secrets.token_hex(32),
               DET_DATA_DIR=str(root / "data"), PYTHONUNBUFFERED="1")
    env.pop("DET_MASTER", None)
    env.pop("RAY_ADDRESS", None)
    started = time.monotonic()
    proc = in_namespace(f'ip link set lo up && exec "{sys.executable}" "{HERE / "_ray_scenario.py"}" {name} "{out}" '
                        f'"{root}"', env, SCENARIO_QUIET_S, moving=lambda: _written(root))
    seconds = time.monotonic() - started
    print(proc.stdout[-4000:])
    assert out.exists(), f"the scenario wrote nothing (exit {proc.returncode}): {proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    result = json.loads(out.read_text())
    result["wall_seconds"] = seconds
    print(f"scenario {name}: {seconds:.1f} s in all; phases: " +
          ", ".join(f"{k} {v:.1f} s" for k, v in (result.get("seconds") or {}).items()))
    assert result["ok"], f"scenario {name} failed: {result.get('error')}\nmaster log:\n{result.get('master_log_tail')}"
    if result.get("ray_temp"):  # the Ray session's logs; kept when the scenario failed
        shutil.rmtree(result["ray_temp"], ignore_errors=True)
    return result


@pytest.fixture(scope="module")
def spread(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    return run_scenario("spread", tmp_path_factory)


@pytest.fixture(scope="module")
def failover(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, Any]:
    return run_scenario("failover", tmp_path_factory)


def _rank0_nodes(runs: List[Dict[str, Any]]) -> List[str]:
    return [run["nodes"]["0"] if "0" in run["nodes"] else run["nodes"][0] for run in runs]


# ------------------------------------------------------------------ without a cluster


def test_unreachable_cluster_is_one_clear_line(tmp_path: pathlib.Path) -> None:
    proc = subprocess.run([DET, "master", "up", "--resource-manager", "ray", "--ray-address", "127.0.0.1:1",
                           "--port", "0", "--data-dir", str(tmp_path / "data")],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert "cannot reach the Ray cluster at 127.0.0.1:1" in proc.stderr
    assert "--ray-address" in proc.stderr and "Traceback" not in proc.stderr


def test_ray_options_need_the_ray_resource_manager(tmp_path: pathlib.Path) -> None:
    proc = subprocess.run([DET, "master", "up", "--ray-address", "127.0.0.1:6379", "--data-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "--ray-address need(s) --resource-manager ray" in proc.stderr
    config = tmp_path / "master.yaml"
    config.write_text("resource_manager: ray\nray_address: 127.0.0.1:1\nray_cpus_per_slot: 0\n")
    proc = subprocess.run([DET, "master", "up", "--config", str(config), "--data-dir", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "--ray-cpus-per-slot must be a positive number" in proc.stderr


def _processes_with(marker: str) -> List[int]:
    found = []
    for entry in pathlib.Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                    errors="replace"):
                found.append(int(entry.name))
        except OSError:
            pass
    return found


@needs_namespaces
def test_a_scenario_that_times_out_leaves_nothing_running() -> None:
    """A scenario the test gives up on (its timeout) ends with everything it started: a busy machine must not be
    made busier by the Ray cluster of a scenario nobody waits for any more."""
    marker = f"{secrets.randbelow(10**6) + 10**6}"
    with pytest.raises(subprocess.TimeoutExpired):
        in_namespace(f"sleep {marker} & exec sleep {marker}", dict(os.environ), timeout=1.0)
    deadline = time.monotonic() + 30  # the kernel ends the namespace's processes after its PID 1
    while _processes_with(f"sleep {marker}") and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _processes_with(f"sleep {marker}")
    for pid in left:  # the test's own processes, by pid
        os.kill(pid, 9)
    assert left == []


# ------------------------------------------------------------------ scenario `spread`: a, d, e


@pytest.mark.slow
@needs_namespaces
def test_startup_prints_the_cluster_slots(spread: Dict[str, Any]) -> None:
    head = spread["master_log_head"]
    assert "Connected to the Ray cluster at 127.0.0.1:" in head
    assert "slots: 4 cpu slot(s) on 2 Ray node(s)" in head
    assert "making 4 cpu slot(s) ready for the first trials" in head
    assert spread["slots"]["total"] == 4 and spread["slots"]["kind"] == "cpu"


@pytest.mark.slow
@needs_namespaces
def test_trials_spread_over_both_nodes_reuse_finished_runs_and_complete(spread: Dict[str, Any]) -> None:
    four = spread["four"]  # 6 trials on 4 slots
    assert four["state"] == "COMPLETED"
    assert len(four["trials"]) == 6 and all(t["state"] == "COMPLETED" for t in four["trials"])
    print(f"runs started in a finished run's placement group and actors: {four['reuses']}")
    assert four["reuses"] >= 1
    # The master made its 4 slots ready when it started (placement groups, actors, fork servers): the first trials
    # took them instead of waiting for new ones.
    print(f"runs started in a placement group made ready at start: {four['made_ready']}")
    assert four["made_ready"] >= 1
    assert all(t["total_batches"] == 20 and t["latest_validation"] for t in four["trials"])
    nodes = [node for runs in four["runs"].values() for node in _rank0_nodes(runs)]
    print(f"runs per node: head {nodes.count(spread['nodes']['head'])}, "
          f"node2 {nodes.count(spread['nodes']['node2'])}")
    assert set(nodes) == {spread["nodes"]["head"], spread["nodes"]["node2"]}
    completed = [c for c in four["checkpoints"] if c["state"] == "COMPLETED"]
    assert {c["trial_id"] for c in completed} == {t["id"] for t in four["trials"]}


@pytest.mark.slow
@needs_namespaces
def test_pause_releases_activate_resumes_kill_releases(spread: Dict[str, Any]) -> None:
    paused, pause = spread["paused"], spread["pause"]
    assert spread["pause_held_pgs"] == 1
    assert paused["state"] == "PAUSED" and paused["live_pgs"] == 0
    assert paused["available"]["CPU"] == paused["total"]["CPU"] == 4
    runs = pause["runs"]
    assert len(runs) >= 2
    checkpointed = pause["trial_at_pause"]["total_batches"]
    first_batch_after = runs[-1]["batches"][0]
    print(f"pause at {max(runs[0]['batches'])} batches, checkpoint at {checkpointed}, resumed at {first_batch_after}")
    assert checkpointed > 0 and first_batch_after == checkpointed + 1
    assert pause["state"] == "CANCELED" and pause["live_pgs_after_kill"] == 0
    assert pause["available_after_kill"]["CPU"] == pause["total"]["CPU"]


@pytest.mark.slow
@needs_namespaces
def test_submission_refuses_what_cannot_run_on_the_cluster(spread: Dict[str, Any]) -> None:
    bad, too_big = spread["bad_storage"], spread["too_big"]
    assert bad["rc"] != 0
    assert spread["nodes"]["node2"] in bad["output"] and "is not the same directory on Ray node" in bad["output"]
    assert "S3" in bad["output"] and "shared file system" in bad["output"]
    assert spread["nodes"]["head"] not in bad["output"]  # the head sees the master's directory
    assert too_big["rc"] != 0
    assert "5 slots per trial, but the Ray cluster has only 4 cpu slot(s)" in too_big["output"]
    assert spread["experiments_after_refusals"] == []


@pytest.mark.slow
@needs_namespaces
def test_two_users_trials_run_as_their_accounts_in_sandboxes_on_the_ray_nodes(spread: Dict[str, Any]) -> None:
    """Issue 33 on a 2-node Ray cluster: a master run as root with --trial-user; alice's and bob's trials run as
    their linked OS accounts in a bubblewrap sandbox their node builds (rm/_ray_worker.py, rm/sandbox.py)."""
    iso = spread["isolation"]
    assert "error" not in iso, iso.get("error")
    head = iso["master_log_head"]
    assert head.count("trials run as their users' OS accounts in a bubblewrap sandbox") == 2, head  # both nodes
    assert "NOT ISOLATED" not in iso["master_log"] and "NOT SANDBOXED" not in iso["master_log"]
    assert "trials run as: each user's linked OS account" in head
    assert iso["alice_state"] == "COMPLETED", "\n".join(iso["alice_logs"])
    assert iso["bob_state"] == "COMPLETED", "\n".join(iso["bob_logs"])
    found = iso["found"]
    print(f"alice's trial ran on node {found['node']}; bob's: {iso['bob_node_lines']}")
    assert (found["uid"], found["node"] in spread["nodes"].values()) == (iso["ids"]["alice"][0], True), found
    for what in ("bob_checkpoint", "read_db", "bob_tmp"):
        assert found[what] in ("PermissionError", "FileNotFoundError"), (what, found)
    assert found["bob_tmp_on_node"] == [], found
    assert set(found["list_data_dir"]) <= {"work", "tensorboard", "checkpoints"}, found  # only what its run uses
    assert found["source"] == "bob-c1", found  # the checkpoint she named (bob's) she may read
    for uuid, (who, uid, gid, mode) in iso["owners"].items():  # files are their account's, private to it
        assert [uid, gid] == iso["ids"][who] and mode & 0o077 == 0, (uuid, who, uid, gid, oct(mode))


@pytest.mark.slow
@needs_namespaces
def test_a_notebook_runs_on_the_worker_node_and_is_reached_through_the_master(spread: Dict[str, Any]) -> None:
    """Issue 31's Ray must-show: with the head disabled, alice's command and notebook are placed on node2 (a
    placement group of their slot there, rm/ray_tasks.py); the command's output comes back; the notebook answers
    through the master's /proxy/<id>/ to alice and refuses bob; its slot is counted while it runs and freed by kill."""
    tasks = spread["tasks"]
    assert "error" not in tasks, tasks.get("error")
    node2, task_id = spread["nodes"]["node2"], tasks["notebook"]["running"]["id"]
    command = tasks["command"]
    assert (command["task"]["exitCode"], "ray-task-says COMMAND" in command["logs"]) == (0, True), command
    assert [line for line in command["logs"] if f"(node id {node2})" in line], command["logs"]
    notebook = tasks["notebook"]
    assert notebook["running"]["state"] == "STATE_RUNNING", notebook["running"]
    assert [line for line in notebook["logs"] if "[ray] task" in line and f"(node id {node2})" in line], \
        notebook["logs"]
    status, answer = notebook["alice"]
    assert status == 200 and "started" in answer, notebook["alice"]
    assert notebook["bob"][0] == 403 and "'alice'" in notebook["bob"][1], notebook["bob"]
    assert [s["allocation_id"] for s in notebook["node2_slots"]].count(task_id) == 1, notebook["node2_slots"]
    used = {p["name"]: p["slots_used"] for p in notebook["pools_running"]}
    assert used.get("default") == 1, notebook["pools_running"]
    ended = notebook["ended"]
    assert ended["state"] == "STATE_TERMINATED" and ended["exitStatus"] == "killed by alice", ended
    assert task_id not in [s["allocation_id"] for s in notebook["node2_slots_after"]]
    assert {p["name"]: p["slots_used"] for p in notebook["pools_after"]}.get("default") == 0


# ------------------------------------------------------------------ scenario `failover`: b, c


@pytest.mark.slow
@needs_namespaces
def test_two_slot_trial_trains_across_both_nodes(failover: Dict[str, Any]) -> None:
    ddp = failover["ddp"]
    assert ddp["state"] == "COMPLETED" and ddp["trial"]["total_batches"] == 10
    placements = [line for line in ddp["logs"] if "[ray] run " in line and " on node " in line]
    nodes = {line.rsplit("(node id ", 1)[1].rstrip(")") for line in placements}
    assert nodes == {failover["nodes"]["head"], failover["nodes"]["node2"]}
    ranks = [line for line in ddp["logs"] if "[det-test] rank" in line]
    assert any("[rank 0] [det-test] rank 0 of 2" in line and "cross_rank 0 of 2 backend gloo" in line for line in ranks)
    assert any("[rank 1] [det-test] rank 1 of 2" in line and "cross_rank 1 of 2 backend gloo" in line for line in ranks)


@pytest.mark.slow
@needs_namespaces
def test_a_torch_distributed_script_runs_one_container_per_node(failover: Dict[str, Any]) -> None:
    script = failover["script"]
    lines = script["logs"]
    assert script["state"] == "COMPLETED", "\n".join(lines[-30:])
    containers = {}
    for line in lines:
        if "[ray] run " in line and " runs container " in line:
            node = line.split("(node id ", 1)[1].split(")", 1)[0]
            containers[node] = line.split(" runs container ", 1)[1].split(" with ", 1)[0]
    assert set(containers) == {failover["nodes"]["head"], failover["nodes"]["node2"]}
    assert sorted(containers.values()) == ["0 of 2", "1 of 2"]
    for rank in (0, 1):  # one worker per node: local rank 0 on each, gathering with the other node's
        assert f"[rank={rank}] ddp: rank {rank} of 2 local_rank 0 gathered [0, 1]" in lines
        assert f"[rank={rank}] ddp: rank {rank} core allgather [0, 1]" in lines


@pytest.mark.slow
@needs_namespaces
def test_a_dead_node_s_trials_finish_on_the_head(failover: Dict[str, Any]) -> None:
    result = failover["failover"]
    head, node2 = failover["nodes"]["head"], failover["nodes"]["node2"]
    assert result["state"] == "COMPLETED"
    assert node2 not in result["alive_nodes"]
    victim = next(t for t in result["trials"] if t["id"] == result["victim"])
    runs = result["runs"][str(victim["id"])]
    assert victim["restarts"] >= 1 and victim["state"] == "COMPLETED"
    assert _rank0_nodes(runs)[0] == node2 and _rank0_nodes(runs)[-1] == head
    resumed_at = runs[-1]["batches"][0]
    # Batches the lost run trained past the checkpoint it resumed from: as far as the master had recorded at the
    # kill, or its log lines came back (none may have: the node can die before the first batch line is shipped).
    redone = max([result["batches_at_kill"], *runs[0]["batches"]]) - (resumed_at - 1)
    print(f"failover: {result['killed_processes']} processes killed, restarts {victim['restarts']}, "
          f"resumed at batch {resumed_at}, batches redone {redone} of {result['length']}, "
          f"recovered in {result['recovery_seconds']:.1f} s")
    assert resumed_at > 1 and 0 <= redone < result["length"]


@pytest.mark.slow
@needs_namespaces
def test_a_disabled_node_s_trial_checkpoints_and_finishes_on_the_other_node(failover: Dict[str, Any]) -> None:
    """Issue 32's must-show "draining a Ray node moves its trials to the other node through their checkpoints;
    nothing is lost": `det agent disable NODE` (admins only) preempts the node's trial, which checkpoints and resumes
    from that checkpoint on the other node; `--drain` keeps new runs off a node."""
    result = failover["drain"]
    assert "error" not in result, result.get("error")
    head, node2 = failover["nodes"]["head"], failover["nodes"]["node2"]
    assert {a["id"] for a in result["agents"]} == {head, node2}, result["agents"]
    assert result["non_admin"]["rc"] != 0 and "only an admin may enable or disable an agent" in \
        result["non_admin"]["output"], result["non_admin"]
    drained = {a["id"]: a for a in result["agents_head_disabled"]}
    assert (drained[head]["enabled"], drained[head]["draining"], drained[node2]["enabled"]) == (False, True, True)
    disabled = {a["id"]: a for a in result["agents_node2_disabled"]}
    assert (disabled[node2]["enabled"], disabled[node2]["draining"]) == (False, False)
    assert "checkpoint and resume" in result["disable_output"], result["disable_output"]
    trial, runs = result["trial"], result["runs"]
    assert result["state"] == "COMPLETED", "\n".join(result["logs"])
    # Preempted, not failed: no restart spent; the first run on node2 (the head was draining), the last on the head.
    assert trial["restarts"] == 0 and trial["total_batches"] == result["length"], trial
    assert _rank0_nodes(runs)[0] == node2 and _rank0_nodes(runs)[-1] == head, runs
    assert [line for line in result["notes"] if f"its Ray node {node2} was disabled" in line], result["logs"][-20:]
    # Nothing lost: the head's run starts right after the checkpoint the node2 run left, and trains to the end.
    resumed_at = runs[-1]["batches"][0]
    trained_on_node2 = max(b for run in runs[:-1] for b in run["batches"])
    print(f"disabled node: trained {trained_on_node2} batches on node2, resumed at {resumed_at} on the head")
    assert 1 < resumed_at <= trained_on_node2 + 1
    assert runs[-1]["batches"] == list(range(resumed_at, result["length"] + 1))
