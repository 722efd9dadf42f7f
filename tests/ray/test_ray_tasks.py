"""Interactive tasks on the Ray resource manager without a cluster (issue 31): where a task is placed (its pool's
enabled nodes, one bundle holding its slots), how its slots are counted, what its node runs (tasks/remote.py's spec,
rm/_ray_worker.py's `start_task`: a real process here), and the master's handle on it (rm/ray_tasks.py), its logs,
exit and the end of a task whose node died. tests/ray/test_ray_rm.py runs a notebook on a real 2-node cluster."""
import io
import json
import os
import pathlib
import signal
import tarfile
import time
import types
from typing import Any, Dict, List, Optional

import pytest

from determined.master.db.models import Task
from determined.master.rm import _ray_worker, ray_pools, ray_tasks
from determined.master.tasks import remote, states
from determined.master.tasks.runner import ENTRY_SCRIPT
from tests.ray._fake_ray_nodes import N1, N2, N3, manager

ray = pytest.importorskip("ray", reason="the Ray resource manager needs `pip install 'determined-revived[ray]'`")


class _Stub:
    """A task as the resource manager counts it."""

    def __init__(self, task_id: str, slots: int, pool: str, node_id: Optional[str], returncode: Optional[int] = None):
        self.task_id, self.slots, self.pool, self.node_id, self.returncode = task_id, slots, pool, node_id, returncode


def test_a_task_is_placed_on_the_enabled_nodes_of_its_pool_in_one_bundle() -> None:
    rm = manager()
    big = rm.task_placement(2, "big")  # each slot takes one pool_big: only N2 has them
    assert big.bundle == {"CPU": 2.0, "pool_big": 2.0} and big.selector == {ray_pools.NODE_ID_LABEL: f"in({N2})"}
    cpu_only = rm.task_placement(0, "gpu")  # a CPU-only task: a quarter of a slot's CPUs, on the pool's node
    assert cpu_only.bundle == {"CPU": 0.25}
    assert cpu_only.selector == {"pool": "gpu", ray_pools.NODE_ID_LABEL: f"in({N1})"}
    assert rm.task_placement(1, "default").selector == {ray_pools.NODE_ID_LABEL: f"in({N3})"}
    rm.disable_node(N3, drain=True)  # no node of the pool left: it waits, off the disabled and the other pools' nodes
    waiting = rm.task_placement(1, "default")
    assert waiting.selector == {ray_pools.NODE_ID_LABEL: f"!in({', '.join(sorted([N1, N2, N3]))})"}
    assert rm.task_placement(1, "no-such-pool").pool == ""


def test_the_slots_of_tasks_are_counted_until_they_end() -> None:
    rm = manager()
    free, usage = rm.free_slots(), rm.pool_usage()
    rm._tasks = {"t-big": _Stub("t-big", 2, "big", N2), "t-wait": _Stub("t-wait", 1, "gpu", None),
                 "t-done": _Stub("t-done", 3, "default", N3, returncode=0)}
    assert rm.free_slots() == free - 3
    after = rm.pool_usage()
    assert (after["big"]["used"], after["gpu"]["used"], after["default"]["used"]) == (
        usage["big"]["used"] + 2, usage["gpu"]["used"] + 1, usage["default"]["used"])
    owners = {a["id"]: a["slot_owners"] for a in rm.agents()}
    assert owners[N2].count("t-big") == 2 and "t-done" not in owners[N3]
    assert "t-done" not in rm._tasks  # an ended task is forgotten


def _task(task_type: str, **more: Any) -> Task:
    return Task(id="0b5e" + "0" * 32, task_type=task_type, owner="alice", slots=1, resource_pool="default",
                service_secret="s3cret", config={"environment": {"environment_variables": ["FOO=bar"]}, **more},
                ssh_public_key="ssh-ed25519 AAAA alice")


def test_the_node_runs_the_task_with_its_own_paths_interpreter_and_address() -> None:
    env = {"DET_TASK_ID": "x", "DET_USER": "alice", "DET_USER_TOKEN": "tok", "DET_SESSION_TOKEN": "tok",
           "DET_WORKDIR": "/master/run", "HOME": "/root", "FOO": "bar", "DET_SLOT_IDS": "[0]"}
    spec = remote.node_spec(_task(states.NOTEBOOK), env, entry_script=ENTRY_SCRIPT, master_url="http://10.0.0.9:8080")
    argv = spec["argv"]
    assert argv[:3] == ["/bin/sh", "{RUN_DIR}/" + remote.ENTRY_NAME, "{PYTHON}"]
    assert "--ip={HOST}" in argv and "--port={PORT}" in argv and remote.REMOTE_ACCESS in argv
    assert "--IdentityProvider.token=s3cret" in argv  # the secret the master's proxy adds stays required
    assert spec["env"]["DET_MASTER"] == "http://10.0.0.9:8080" and spec["env"]["FOO"] == "bar"
    assert spec["env"]["DET_WORKDIR"] == "{RUN_DIR}" and spec["env"]["NOTEBOOK_PORT"] == "{PORT}"
    assert "HOME" not in spec["env"]  # the node's own environment, not the master's
    assert spec["server"] and spec["files"][remote.ENTRY_NAME] == ENTRY_SCRIPT
    shell = remote.node_spec(_task(states.SHELL), env, entry_script=ENTRY_SCRIPT, master_url="m", host_key="KEY")
    assert shell["argv"][shell["argv"].index("--host") + 1] == "{HOST}"
    assert shell["files"][remote.HOST_KEY_NAME] == "KEY"
    assert shell["files"][remote.AUTHORIZED_KEY_NAME] == "ssh-ed25519 AAAA alice\n"
    assert not remote.runs_on_ray(manager(), states.TENSORBOARD) and remote.runs_on_ray(manager(), states.COMMAND)


def _context(files: Dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


@pytest.fixture
def node(monkeypatch: pytest.MonkeyPatch) -> Any:
    """rm/_ray_worker.py's RankWorker in this process, as if on a Ray node with the IP 127.0.0.1."""
    monkeypatch.setattr(_ray_worker, "_node_ip", lambda: "127.0.0.1")
    monkeypatch.setattr(ray, "get_gpu_ids", lambda: [])
    monkeypatch.setattr(ray, "get_runtime_context", lambda: types.SimpleNamespace(get_node_id=lambda: "node-b"))
    worker = _ray_worker.RankWorker()
    yield worker
    worker.kill_group(signal.SIGKILL)


class _Ref:
    def __init__(self, call: Any) -> None:
        self.call = call


class _FakeRay:
    """Ray's calls as RayTask makes them, run at once against an in-process RankWorker (`lose_after`: the number of
    drains after which the actor dies, as when its node goes away)."""

    class exceptions:
        RayTaskError = type("RayTaskError", (Exception,), {})

    def __init__(self, worker: Any, lose_after: Optional[int] = None) -> None:
        self.worker, self.lose_after, self.drains, self.killed = worker, lose_after, 0, []

    def wait(self, refs: List[Any], timeout: float) -> Any:
        return refs, []

    def get(self, ref: Any) -> Any:
        return ref.call() if isinstance(ref, _Ref) else ref

    def kill(self, actor: Any, no_restart: bool = True) -> None:
        self.killed.append(actor)

    def actor_class(self) -> Any:
        fake = self

        class Method:
            def __init__(self, name: str) -> None:
                self.name = name

            def remote(self, *args: Any) -> _Ref:
                def call() -> Any:
                    if self.name == "drain":
                        fake.drains += 1
                        if fake.lose_after is not None and fake.drains > fake.lose_after:
                            raise RuntimeError("ActorDiedError: the actor died unexpectedly")
                    return getattr(fake.worker, self.name)(*args)
                return _Ref(call) if self.name != "kill_group" else call()

        actor = types.SimpleNamespace(start_task=Method("start_task"), drain=Method("drain"),
                                      kill_group=Method("kill_group"))
        return types.SimpleNamespace(options=lambda **_: types.SimpleNamespace(remote=lambda: actor))


def _launch(fake: _FakeRay, spec: Dict[str, Any], keeper_dir: pathlib.Path, dead: bool = False) -> Any:
    pg = types.SimpleNamespace(ready=lambda: "ready")
    released: List[Any] = []
    task = ray_tasks.RayTask(spec["task_id"], 1, ray_tasks.TaskPlacement({"CPU": 1.0}, None, "default", 0), spec,
                             None, fake, fake.actor_class(), lambda **kw: kw, lambda *a, **kw: pg,
                             lambda pg, actors: released.append(pg), lambda node_id: dead,
                             keeper_dir=str(keeper_dir), line_bytes=1000, budget=10_000)
    task.released = released
    return task


def _lines(keeper_dir: pathlib.Path, stream: str) -> List[str]:
    return [line.split(" ", 1)[1] for line in (keeper_dir / f"{stream}.log").read_text().splitlines()]


def test_a_command_runs_on_its_node_with_its_context_and_its_lines_and_exit_come_back(
        node: Any, tmp_path: pathlib.Path) -> None:
    task = _task(states.COMMAND, entrypoint=["/bin/sh", "-c", 'echo "hook=$HOOK foo=$FOO master=$DET_MASTER '
                                                              'cwd=$(pwd)"; cat data.txt; echo oops >&2; exit 3'])
    task.context = _context({"startup-hook.sh": "export HOOK=ran\n", "data.txt": "from the context\n"})
    spec = remote.node_spec(task, {"DET_TASK_ID": task.id}, entry_script=ENTRY_SCRIPT, master_url="http://m:1")
    handle = _launch(_FakeRay(node), spec, tmp_path / "keeper")
    assert handle.wait(60)
    out = _lines(tmp_path / "keeper", "stdout")
    assert handle.poll() == 3 and handle.node_id == "node-b" and handle.address() is None
    assert out[0].startswith(f"[ray] task {task.id} on Ray node 127.0.0.1 (node id node-b), pid ")
    assert out[1].startswith("hook=ran foo=bar master=http://m:1 cwd=") and out[2] == "from the context"
    assert _lines(tmp_path / "keeper", "stderr") == ["oops"]
    assert json.loads((tmp_path / "keeper" / "exit.json").read_text())["exit_code"] == 3
    assert handle.released and handle.pid is None  # nothing of this machine for a restarted master to adopt
    run_dir = pathlib.Path(out[1].split("cwd=", 1)[1])
    assert not run_dir.exists()  # the node's run directory goes with its process


def test_a_task_whose_node_died_ends_with_a_reason_naming_the_node(node: Any, tmp_path: pathlib.Path) -> None:
    task = _task(states.COMMAND, entrypoint=["/bin/sh", "-c", "echo up; sleep 60"])
    spec = remote.node_spec(task, {}, entry_script=ENTRY_SCRIPT, master_url="m")
    handle = _launch(_FakeRay(node, lose_after=1), spec, tmp_path / "keeper", dead=True)
    assert handle.wait(60)
    found = json.loads((tmp_path / "keeper" / "exit.json").read_text())
    assert found["exit_code"] == ray_tasks.LOST_CODE
    assert found["reason"] == "its Ray node 127.0.0.1 (node id node-b) died" == handle.end_reason
    lines = _lines(tmp_path / "keeper", "stderr")
    assert f"[ray] task {task.id}: its Ray node 127.0.0.1 (node id node-b) died" in lines


def test_a_killed_task_is_signalled_on_its_node(node: Any, tmp_path: pathlib.Path) -> None:
    task = _task(states.COMMAND, entrypoint=["/bin/sh", "-c", "echo up; exec sleep 60"])
    spec = remote.node_spec(task, {}, entry_script=ENTRY_SCRIPT, master_url="m")
    handle = _launch(_FakeRay(node), spec, tmp_path / "keeper")
    while handle.remote_pid is None and handle.poll() is None:
        handle.wait(0.05)
    handle.signal(signal.SIGTERM)
    assert handle.wait(60) and handle.poll() == 128 + signal.SIGTERM
    assert not os.path.exists(f"/proc/{handle.remote_pid}/cmdline") or b"sleep" not in open(
        f"/proc/{handle.remote_pid}/cmdline", "rb").read()


def test_a_task_killed_before_its_placement_never_starts(node: Any, tmp_path: pathlib.Path) -> None:
    fake = _FakeRay(node)
    fake.wait = lambda refs, timeout: (time.sleep(0.01), ([], refs))[1]  # never placed
    spec = remote.node_spec(_task(states.COMMAND, entrypoint=["true"]), {}, entry_script=ENTRY_SCRIPT, master_url="m")
    handle = _launch(fake, spec, tmp_path / "keeper")
    handle.signal(signal.SIGKILL)
    assert handle.wait(30) and handle.poll() == -signal.SIGKILL and handle.remote_pid is None


def test_the_master_proxies_to_the_address_its_node_gave(tmp_path: pathlib.Path) -> None:
    """tasks/runner.py's endpoint() gives the node's host and port; api/proxy.py connects there (127.0.0.2 here: a
    loopback address that is not 127.0.0.1, where nothing listens)."""
    import asyncio
    import concurrent.futures

    from determined.master.api import proxy
    from determined.master.tasks.runner import TaskProcess, TaskRunner

    class _OnNode:
        def __init__(self, where: Any) -> None:
            self.where, self.dir = where, str(tmp_path)

        def poll(self) -> Optional[int]:
            return None

        def address(self) -> Any:
            return self.where

    runner = TaskRunner(master=None)
    runner._procs = {"nb": TaskProcess("nb", states.NOTEBOOK, _OnNode(None), [0], str(tmp_path), secret="s")}
    assert runner.endpoint("nb") is None  # not placed yet: nothing to proxy to
    heard: List[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        heard.append(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()

    async def main() -> List[Any]:
        server = await asyncio.start_server(serve, "127.0.0.2", 0)
        port = server.sockets[0].getsockname()[1]
        runner._procs["nb"].popen.where = ("127.0.0.2", port)
        assert runner.endpoint("nb") == (port, "s", states.NOTEBOOK, "127.0.0.2")
        sent: List[Any] = []

        async def receive() -> Dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: Dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "GET", "path": "/proxy/nb/api/status", "query_string": b""}
        middleware = proxy.TaskProxyMiddleware(app=None)
        await middleware._relay_http(scope, receive, send, "nb", port, "s", [], *runner.endpoint("nb")[3:])
        server.close()
        return sent

    # in a thread of its own: a browser test run before on this worker can leave an event loop in the main thread
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        sent = pool.submit(asyncio.run, main()).result()
    assert sent[0]["status"] == 200 and b"".join(m.get("body", b"") for m in sent[1:]) == b"ok"
    assert b"authorization: token s" in heard[0].lower()  # the task's secret, as on the master's machine
