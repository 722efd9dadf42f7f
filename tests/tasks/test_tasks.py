"""Interactive tasks through a real master on 127.0.0.1: commands, their logs and exit codes, slots shared with
trials, who may see and kill them, the proxy, and a JupyterLab notebook reached only through it."""
import base64
import io
import json
import pathlib
import sys
import tarfile
import time
import uuid
from typing import Any, Callable, Dict, Iterator

import httpx
import pytest

from determined.common.api import Session
from determined.master import embedded
from determined.master.rm import Slots
from determined.master.security import users


def wait_for(what: Callable[[], Any], timeout: float = 60.0, message: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {message or what}")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    """One master (1 CPU slot) for the module, with alice, bob and an admin."""
    users._SCRYPT_N = 2**10
    data = tmp_path_factory.mktemp("tasks") / "data"
    running = embedded.start(data, slots=Slots(gpus=[], cpu_count=1))
    running.master.tasks.poll_s = 0.2
    admin = Session(running.url, user="admin")
    admin.login("admin", "", make_default=False)
    for name in ("alice", "bob"):
        admin.post("/users", {"username": name, "password": "pw-" + name, "admin": False})
    sessions = {"admin": admin}
    for name in ("alice", "bob"):
        s = Session(running.url, user=name)
        s.login(name, "pw-" + name, make_default=False)
        sessions[name] = s
    try:
        yield {"master": running, "url": running.url, **sessions}
    finally:
        running.stop(timeout=10)


def _context(files: Dict[str, str]) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buf.getvalue()).decode()


def _ended(session: Session, task_id: str) -> Dict[str, Any]:
    return wait_for(lambda: (lambda t: t if t["state"] == "STATE_TERMINATED" else None)(
        session.get(f"/tasks/{task_id}")["task"]), message=f"task {task_id} to end")


def _logs(session: Session, task_id: str) -> str:
    return "\n".join(line["message"] for line in session.get(f"/tasks/{task_id}/logs")["logs"])


def test_command_runs_its_context_with_the_startup_hook_and_records_exit_codes(cluster: Dict[str, Any]) -> None:
    alice = cluster["alice"]
    context = _context({"startup-hook.sh": "export GREETING=hello-from-hook\n",
                        "prep.py": "import os, sys\nprint(os.environ['GREETING'], os.environ['DET_TASK_TYPE'])\n"
                                   "from determined.common.api import Session\n"
                                   "s = Session(os.environ['DET_MASTER'])\n"
                                   "print('user', s.get('/me')['user']['username'])\n"  # the SDK acts as the owner
                                   "open(os.environ['TOKEN_FILE'], 'w').write(os.environ['DET_SESSION_TOKEN'])\n"})
    token_file = cluster["master"].data_dir.parent / "task-token"
    answer = alice.post("/commands", {"config": {"entrypoint": [f"{sys.executable} prep.py"], "resources": {"slots": 0},
                                                 "environment": {"image": "some/image:1", "environment_variables": [
                                                     f"TOKEN_FILE={token_file}"]}}, "context": context})
    assert any("environment.image" in w for w in answer["warnings"])  # a container field gets its note
    task = _ended(alice, answer["task"]["id"])
    assert task["exitCode"] == 0, _logs(alice, task["id"])
    logs = _logs(alice, task["id"])
    assert "hello-from-hook COMMAND" in logs and "user alice" in logs
    task_token = token_file.read_text()
    assert httpx.get(f"{cluster['url']}/api/v1/me", headers={"Authorization": f"Bearer {task_token}"}).status_code \
        == 401  # the task's token was revoked when it ended
    failing = alice.post("/commands", {"config": {"entrypoint": ["sh", "-c", "echo bad >&2; exit 3"],
                                                  "resources": {"slots": 0}}})["task"]
    ended = _ended(alice, failing["id"])
    assert ended["exitCode"] == 3 and "exit code 3" in ended["exitStatus"]
    assert "bad" in _logs(alice, failing["id"])


def test_bad_configs_are_refused_by_name(cluster: Dict[str, Any]) -> None:
    alice = cluster["alice"]
    for config, words in ((({"entrypoint": ["true"], "resources": {"slots": 5}}), "exceeds cluster capacity"),
                          ({"entrypoint": ["true"], "colour": "red"}, "colour: unknown field"),
                          ({"entrypoint": ["true"], "idle_timeout": "soon"}, "idle_timeout"),
                          ({"resources": {"slots": 0}}, "entrypoint")):
        with pytest.raises(Exception) as e:
            alice.post("/commands", {"config": config})
        assert words in str(e.value)


def test_tasks_are_held_to_pool_bindings_and_the_priority_limit(cluster: Dict[str, Any]) -> None:
    """As an experiment is (docs/scheduling.md): a pool bound to another workspace is refused naming the binding;
    a non-admin's priority above the master's priority_limit is refused; nothing refused is stored."""
    from determined.master.scheduling import pools

    master = cluster["master"].master
    before = master.pools
    master.pools = pools.parse({"priority_limit": 20}, [{"pool_name": "default"}, {"pool_name": "gpus"}])
    alice, bob, admin = cluster["alice"], cluster["bob"], cluster["admin"]
    try:
        admin.post("/workspaces", {"name": "pool-team"})
        admin.post("/resource-pools/gpus/workspace-bindings", {"workspace_names": ["pool-team"]})
        count = len(admin.get("/tasks")["tasks"])
        with pytest.raises(Exception) as e:
            bob.post("/commands", {"config": {"entrypoint": ["true"], "resources": {"slots": 0, "resource_pool": "gpus"}}})
        assert "bound to workspace(s) 'pool-team'" in str(e.value)
        with pytest.raises(Exception) as e:
            alice.post("/commands", {"config": {"entrypoint": ["true"], "resources": {"slots": 0, "priority": 3}}})
        assert "priority_limit" in str(e.value)
        assert len(admin.get("/tasks")["tasks"]) == count, "nothing refused was stored"
    finally:
        master.pools = before


def test_only_the_owner_or_an_admin_reads_logs_and_kills(cluster: Dict[str, Any]) -> None:
    alice, bob, admin = cluster["alice"], cluster["bob"], cluster["admin"]
    task = alice.post("/commands", {"config": {"entrypoint": ["sleep 60"], "resources": {"slots": 0}}})["task"]
    wait_for(lambda: alice.get(f"/tasks/{task['id']}")["task"]["state"] == "STATE_RUNNING")
    for call in (lambda: bob.get(f"/tasks/{task['id']}/logs"), lambda: bob.post(f"/commands/{task['id']}/kill"),
                 lambda: bob.get(f"/tasks/{task['id']}/config")):
        with pytest.raises(Exception) as e:
            call()
        assert "403" in str(e.value) or "only 'alice'" in str(e.value)
    assert bob.get(f"/tasks/{task['id']}")["task"]["username"] == "alice"  # summaries are readable
    admin.post(f"/commands/{task['id']}/kill")
    ended = _ended(alice, task["id"])
    assert "killed by admin" in ended["exitStatus"]


def test_a_task_holding_the_only_slot_makes_a_trial_wait(cluster: Dict[str, Any]) -> None:
    from sqlalchemy import select

    from determined.master.db import Trial
    from tests.master._helpers import config, model_def

    alice = cluster["alice"]
    master = cluster["master"].master
    task = alice.post("/commands", {"config": {"entrypoint": ["sleep 60"], "resources": {"slots": 1}}})["task"]
    wait_for(lambda: alice.get(f"/tasks/{task['id']}")["task"]["state"] == "STATE_RUNNING")
    assert master.rm.free_slots() == 0  # the resource manager the trials use counts the task's slot
    second = alice.post("/commands", {"config": {"entrypoint": ["true"], "resources": {"slots": 1}}})["task"]
    exp = alice.post("/experiments", {"config": config(max_trials=1, max_restarts=0),
                                      "model_definition": model_def()})["experiment"]

    def runs_of_trials() -> int:
        with master.read() as s:
            return sum(t.runs for t in s.scalars(select(Trial).where(Trial.experiment_id == exp["id"])))

    seen = master.tasks.ticks
    wait_for(lambda: master.tasks.ticks >= seen + 3, message="three ticks of the master")
    assert alice.get(f"/tasks/{second['id']}")["task"]["state"] == "STATE_QUEUED"
    assert runs_of_trials() == 0  # the trial waits for the slot
    alice.post(f"/tasks/{task['id']}/kill")
    _ended(alice, task["id"])
    assert _ended(alice, second["id"])["exitCode"] == 0  # the queued task goes first, then the trial
    wait_for(lambda: runs_of_trials() >= 1, message="the trial to start on the freed slot")
    alice.post(f"/experiments/{exp['id']}/kill")
    wait_for(lambda: master.rm.free_slots() == 1, message="the slot to be free")


def _execute(ws: Any, code: str) -> str:
    """Run `code` in a Jupyter kernel over its channels WebSocket; its stdout."""
    msg_id = uuid.uuid4().hex
    ws.send(json.dumps({"header": {"msg_id": msg_id, "username": "alice", "session": uuid.uuid4().hex,
                                   "msg_type": "execute_request", "version": "5.3"},
                        "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
                        "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                                    "allow_stdin": False}}))
    out = ""
    while True:
        message = json.loads(ws.recv(timeout=60))
        if message.get("parent_header", {}).get("msg_id") != msg_id:
            continue
        if message["msg_type"] == "stream":
            out += message["content"]["text"]
        if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
            return out


def test_notebook_through_the_proxy_owner_only_and_killed_when_idle(cluster: Dict[str, Any]) -> None:
    pytest.importorskip("jupyterlab")
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    alice, bob, url = cluster["alice"], cluster["bob"], cluster["url"]
    runner = cluster["master"].master.tasks
    nb = alice.post("/notebooks", {"config": {"resources": {"slots": 0}, "idle_timeout": "3s"}})["task"]
    assert nb["serviceAddress"] == f"/proxy/{nb['id']}/"
    wait_for(lambda: alice.get(f"/tasks/{nb['id']}")["task"]["state"] == "STATE_RUNNING", timeout=90,
             message="JupyterLab to answer")
    base = f"{url}/proxy/{nb['id']}"
    as_alice, as_bob = ({"Authorization": f"Bearer {alice.token}"}, {"Authorization": f"Bearer {bob.token}"})
    owner = httpx.get(f"{base}/api/status", headers=as_alice)
    assert owner.status_code == 200 and "started" in owner.json()
    assert httpx.get(f"{base}/api/status", headers=as_bob).status_code == 403
    assert httpx.get(f"{base}/api/status").status_code == 401
    assert httpx.post(f"{base}/api/kernels", headers=as_bob, json={}).status_code == 403
    # a browser: the one-time address becomes a cookie of this task only, then a redirect inside /proxy/<id>/
    opened = alice.post(f"/tasks/{nb['id']}/open")["url"]
    with httpx.Client(base_url=url) as browser:
        first = browser.get(opened)
        assert first.status_code == 303 and first.headers["location"] == f"/proxy/{nb['id']}/"
        assert browser.get(f"/proxy/{nb['id']}/api/status").status_code == 200
        assert browser.get(f"/proxy/{nb['id']}/").status_code == 302  # JupyterLab's redirect to its lab page
    assert httpx.get(f"{url}{opened}").status_code == 401  # the code is spent: another browser gets nothing
    # a body goes through, and a file name with `?` in it (percent-encoded) stays one name
    put = httpx.put(f"{base}/api/contents/odd%3Fname.txt", headers=as_alice,
                    json={"type": "file", "format": "text", "content": "through the proxy"})
    assert put.status_code == 201, put.text
    got = httpx.get(f"{base}/api/contents/odd%3Fname.txt", headers=as_alice).json()
    assert got["name"] == "odd?name.txt" and got["content"] == "through the proxy"
    # a kernel, and its channels WebSocket through the proxy: alice runs code, bob's handshake is refused
    kernel = httpx.post(f"{base}/api/kernels", headers=as_alice, json={}, timeout=60).json()
    channels = f"{base.replace('http://', 'ws://')}/api/kernels/{kernel['id']}/channels"
    with pytest.raises(InvalidStatus) as refused:
        connect(channels, additional_headers=as_bob, open_timeout=30)
    assert refused.value.response.status_code == 403
    with connect(channels, additional_headers=as_alice, open_timeout=30, max_size=None) as ws:
        assert _execute(ws, "print(6 * 7)").strip() == "42"
    # in use (a kernel runs): not killed past its idle_timeout
    started = time.monotonic()
    polls = runner.polls_of(nb["id"])
    wait_for(lambda: time.monotonic() - started > 4 and runner.polls_of(nb["id"]) >= polls + 3, timeout=60)
    assert alice.get(f"/tasks/{nb['id']}")["task"]["state"] == "STATE_RUNNING"
    # no kernel left: idle, and killed with the reason
    assert httpx.delete(f"{base}/api/kernels/{kernel['id']}", headers=as_alice).status_code == 204
    ended = _ended(alice, nb["id"])
    assert "idle for more than 3s" in ended["exitStatus"]
    assert "idle for more than 3s" in _logs(alice, nb["id"])


def test_det_cmd_run_prints_the_output_and_det_task_lists_it(cluster: Dict[str, Any], tmp_path: pathlib.Path,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture) -> None:
    from determined.cli.main import main

    monkeypatch.setenv("DET_MASTER", cluster["url"])
    Session(cluster["url"], user="alice").login("alice", "pw-alice", make_default=True)
    (tmp_path / "ctx").mkdir()
    (tmp_path / "ctx" / "prep.py").write_text("print('prepared', 6 * 7)\n")
    assert main(["cmd", "run", "--context", str(tmp_path / "ctx"), "--config", "resources.slots=0",
                 "python3 prep.py"]) == 0
    out = capsys.readouterr().out
    assert "Launched command" in out and "prepared 42" in out
    task_id = out.split("(id: ")[1].split(",")[0]
    assert main(["task", "list", "-a", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert any(t["id"] == task_id and t["exitCode"] == 0 for t in listed)
    assert main(["cmd", "run", "-d", "--config", "resources.slots=0", "exit 4"]) == 0
    failing = capsys.readouterr().out.strip()
    assert main(["cmd", "logs", "-f", failing[:8]]) == 1  # a unique prefix; the failed command's code
    assert "exit code 4" in capsys.readouterr().out
    assert main(["cmd", "config", failing, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["entrypoint"] == ["exit 4"]
    # bob may not kill alice's task: the CLI names why and kills nothing
    monkeypatch.setenv("DET_USER", "bob")
    Session(cluster["url"], user="bob").login("bob", "pw-bob", make_default=False)
    assert main(["cmd", "kill", task_id]) == 1
    assert "only 'alice' or an admin" in capsys.readouterr().err


def test_a_tensorboard_task_opens_for_every_user_who_may_read_the_experiment(cluster: Dict[str, Any]) -> None:
    pytest.importorskip("tensorboard")
    from tests.master._helpers import config, model_def

    alice, bob, url = cluster["alice"], cluster["bob"], cluster["url"]
    exp = alice.post("/experiments", {"config": config(max_trials=1), "model_definition": model_def(),
                                      "activate": False})["experiment"]
    with pytest.raises(Exception) as e:
        alice.post("/tensorboards", {"experiment_ids": [exp["id"], 987654]})
    assert "987654" in str(e.value)
    tb = alice.post("/tensorboards", {"experiment_ids": [exp["id"]], "config": {"resources": {"slots": 1}}})
    assert tb["task"]["slots"] == 0 and tb["task"]["description"].startswith("TensorBoard (")
    task_id = tb["task"]["id"]
    wait_for(lambda: alice.get(f"/tasks/{task_id}")["task"]["state"] == "STATE_RUNNING", timeout=90,
             message="TensorBoard to answer")
    page = httpx.get(f"{url}/proxy/{task_id}/data/environment", headers={"Authorization": f"Bearer {bob.token}"})
    assert page.status_code == 200 and "data_location" in page.text
    with pytest.raises(Exception):
        bob.post(f"/tensorboards/{task_id}/kill")  # reading is not owning
    alice.post(f"/tensorboards/{task_id}/kill")
    assert "killed by alice" in _ended(alice, task_id)["exitStatus"]


def test_a_shell_through_the_master_runs_commands_copies_files_and_forwards_ports(
        cluster: Dict[str, Any], tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture) -> None:
    pytest.importorskip("asyncssh")
    import shlex
    import socket
    import subprocess
    import sys

    from determined.cli.main import main

    alice, bob, url = cluster["alice"], cluster["bob"], cluster["url"]
    monkeypatch.setenv("DET_MASTER", url)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # where the CLI keeps the shell's key
    Session(url, user="alice").login("alice", "pw-alice", make_default=True)
    shell = alice.post("/shells", {"config": {"resources": {"slots": 0}}})["task"]
    wait_for(lambda: alice.get(f"/tasks/{shell['id']}")["task"]["state"] == "STATE_RUNNING", timeout=60,
             message="the shell's SSH server")
    assert bob.get(f"/shells/{shell['id']}")["privateKey"] is None  # the key is the owner's (and admins')
    assert main(["shell", "show-ssh-command", shell["id"]]) == 0
    ssh = shlex.split(capsys.readouterr().out.strip())
    run = subprocess.run(ssh + ["hostname; echo $DET_TASK_TYPE"], capture_output=True, text=True, timeout=60)
    assert run.stdout.split() == [socket.gethostname(), "SHELL"], run.stderr
    # scp both ways, with the same options
    options = ssh[1:-1]
    (tmp_path / "up.txt").write_text("to the shell\n")
    target = f"{ssh[-1]}:{tmp_path}/copied.txt"
    up = subprocess.run(["scp", *options, str(tmp_path / "up.txt"), target], timeout=60, capture_output=True,
                        text=True)
    assert up.returncode == 0, up.stderr
    assert (tmp_path / "copied.txt").read_text() == "to the shell\n"
    down = subprocess.run(["scp", *options, target, str(tmp_path / "down.txt")], timeout=60, capture_output=True,
                          text=True)
    assert down.returncode == 0, down.stderr
    assert (tmp_path / "down.txt").read_text() == "to the shell\n"
    # a port forward: a local port to the master's own port, from the shell's side
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        local = probe.getsockname()[1]
    master_port = int(url.rsplit(":", 1)[1])
    forward = subprocess.Popen(ssh[:-1] + ["-o", "ExitOnForwardFailure=yes", "-N", "-L",
                                           f"{local}:127.0.0.1:{master_port}", ssh[-1]],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        def forwarded() -> bool:
            try:
                return httpx.get(f"http://127.0.0.1:{local}/api/v1/master/info", timeout=5,
                                 headers={"Host": f"127.0.0.1:{master_port}"}).status_code == 200
            except httpx.HTTPError:
                return False
        wait_for(forwarded, timeout=30, message="the port forward")
    finally:
        forward.kill()
        forward.wait()
    # bob's tunnel is refused by the master before a byte reaches the shell
    Session(url, user="bob").login("bob", "pw-bob", make_default=False)
    refused = subprocess.run([sys.executable, "-m", "determined.cli.tunnel", url, shell["id"], "--user", "bob"],
                             capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert refused.returncode == 1 and "HTTP 403" in refused.stderr
    alice.post(f"/shells/{shell['id']}/kill")
    _ended(alice, shell["id"])


def test_a_shells_terminal_in_the_browser_is_its_owners_login_shell(cluster: Dict[str, Any]) -> None:
    """/api/v1/shells/{id}/terminal (the Tasks page's terminal): the owner's token opens a login shell on a pty of
    the asked size that runs what is typed and follows a resize; the shell's exit ends it with its status. Bob, a
    bad token, a bad first message, an unknown shell and an ended one are refused with a reason and nothing runs."""
    pytest.importorskip("asyncssh")
    from websockets.sync.client import connect

    alice, bob, admin, url = cluster["alice"], cluster["bob"], cluster["admin"], cluster["url"]
    shell = alice.post("/shells", {"config": {"resources": {"slots": 0}}})["task"]
    wait_for(lambda: alice.get(f"/tasks/{shell['id']}")["task"]["state"] == "STATE_RUNNING", timeout=60,
             message="the shell's SSH server")
    address = url.replace("http://", "ws://") + f"/api/v1/shells/{shell['id']}/terminal"

    def read_until(ws: Any, needle: bytes) -> bytes:
        got = b""
        while needle not in got:
            message = ws.recv(timeout=30)
            assert isinstance(message, bytes), message  # output until then, not an end
            got += message
        return got

    for who in (alice, admin):
        with connect(address) as ws:
            ws.send(json.dumps({"token": who.token, "cols": 100, "rows": 30}))
            ws.send(b"echo marker-$((6*7)); stty size; echo $TERM\r")
            out = read_until(ws, b"xterm-256color\r\n")
            assert b"marker-42" in out and b"30 100" in out
            ws.send(json.dumps({"cols": 120, "rows": 40}))
            ws.send(b"stty size\r")
            assert b"40 120" in read_until(ws, b"40 120")
            ws.send(b"exit 3\r")
            while isinstance(message := ws.recv(timeout=30), bytes):
                pass
            assert json.loads(message) == {"exitStatus": 3, "message": "the shell ended with exit status 3"}

    def refused(opening: Any) -> Any:
        with connect(address.replace(shell["id"], opening.pop("task", shell["id"]))) as ws:
            ws.send(opening["send"])
            end = json.loads(ws.recv(timeout=30))
            with pytest.raises(Exception):
                ws.recv(timeout=30)
            return end["message"], ws.close_code

    message, code = refused({"send": json.dumps({"token": bob.token, "cols": 80, "rows": 24})})
    assert code == 4403 and "only its owner and admins" in message
    message, code = refused({"send": json.dumps({"token": "not-a-token", "cols": 80, "rows": 24})})
    assert code == 4401 and "log in again" in message
    message, code = refused({"send": json.dumps({"token": alice.token, "cols": "wide", "rows": 24, "x": 1})})
    assert code == 4400 and "cols" in message and "x" in message
    message, code = refused({"send": b"\x03"})
    assert code == 4400 and "must be text" in message
    message, code = refused({"send": json.dumps({"token": alice.token, "cols": 80, "rows": 24}), "task": "nope"})
    assert code == 4404 and "not found" in message
    with connect(address) as ws:  # open while the shell is killed: the terminal says so
        ws.send(json.dumps({"token": alice.token, "cols": 80, "rows": 24}))
        ws.send(b"echo ready\r")
        read_until(ws, b"ready\r\n")
        alice.post(f"/tasks/{shell['id']}/kill")
        while isinstance(message := ws.recv(timeout=60), bytes):
            pass
        end = json.loads(message)
        assert end["exitStatus"] is None and "the task was killed" in end["message"]
    _ended(alice, shell["id"])
    message, code = refused({"send": json.dumps({"token": alice.token, "cols": 80, "rows": 24})})
    assert code == 4409 and "not running" in message
