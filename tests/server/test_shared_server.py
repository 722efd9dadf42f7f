"""A team shares one `det master up` (issue 19): the attacks of the probe, by real users against a real server.

alice keeps a registered model; bob tries to delete the master's files through checkpoint GC, to read alice's
storage keys, to fill the database with one log line, and to start a search of a billion trials.
"""
import io
import os
import pathlib
import re
import subprocess
import sys
import tarfile
import threading
import time
import uuid
from typing import Any, Dict, Iterator, List

import pytest

from determined import errors
from determined.common.api import Session
from tests.auth._helpers import add_user
from tests.master._helpers import config, model_def

from ._server import ServerProcess, server_db_url, wait_for

LINE_LIMIT = 4096
TRIAL_LOG_LIMIT = 256 * 1024
SECRETS = ("AKIA-alice-key", "alice-s3-secret", "alice-data-secret", "alice-wandb-key", "alice-registry-pw")


class Team:
    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        admin = Session(server.url, user="admin")
        add_user(admin, "alice", "alice-pw")
        add_user(admin, "bob", "bob-pw")
        admin.close()

    def session(self, user: str) -> Session:
        session = Session(self.server.url, user=user)
        session.login(user, f"{user}-pw", make_default=False)
        return session


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    root = tmp_path_factory.mktemp("team")
    master_yaml = root / "master.yaml"
    master_yaml.write_text(f"log_line_max_bytes: {LINE_LIMIT}\ntrial_log_max_bytes: {TRIAL_LOG_LIMIT}\n"
                           "checkpoint_storage_endpoints: [http://127.0.0.1:9]\n")  # alice's S3 storage below
    server = ServerProcess(root / "data", db=server_db_url(), args=["--config", str(master_yaml)]).start()
    try:
        yield Team(server)
    finally:
        server.stop()


def test_a_server_whose_trials_run_as_its_own_user_says_so_at_start(team: Team) -> None:
    warning = [line for line in team.server.output().splitlines() if "TRIALS ARE NOT ISOLATED" in line]
    assert len(warning) == 1 and "trial_user" in warning[0] and "docs/auth.md" in warning[0], warning


def refused(status: int, call: Any, *args: Any) -> str:
    with pytest.raises(errors.APIError) as info:
        call(*args)
    assert info.value.status_code == status, str(info.value)
    return str(info.value) + " " + " ".join(info.value.problems or [])


def create(session: Session, activate: bool = True, **extra: Any) -> int:
    body = {"config": config(**extra), "model_definition": model_def(), "activate": activate}
    return int(session.post("/experiments", body)["experiment"]["id"])


def state(session: Session, exp_id: int) -> str:
    return str(session.get(f"/experiments/{exp_id}")["experiment"]["state"])


def fake_env(**values: Any) -> Dict[str, Any]:
    return {"environment_variables": [f"FAKE_{k.upper()}={v}" for k, v in values.items()]}


def test_checkpoint_ids_and_storage_roots_keep_the_masters_files_and_alices_model(team: Team) -> None:
    data_dir = team.server.data_dir
    alice, bob = team.session("alice"), team.session("bob")
    # alice trains; her checkpoints are real files; she registers the last one.
    exp_a = create(alice, max_trials=1, length=20, environment=fake_env(store=1))
    wait_for(lambda: state(alice, exp_a) == "COMPLETED", 60, "alice's experiment")
    [ckpt] = [c for c in alice.get(f"/experiments/{exp_a}/checkpoints")["checkpoints"] if c["state"] == "COMPLETED"]
    alice.post("/models/alices-model", {"description": "mine"})
    alice.post("/models/alices-model/versions", {"checkpoint_uuid": ckpt["uuid"]})

    # bob points checkpoint storage at the master's own files: refused at submission, naming the allowed roots.
    roots = str(data_dir / "checkpoints")
    (data_dir / "checkpoints" / "planted").symlink_to(data_dir, target_is_directory=True)  # a link, as a trial could
    for storage in ({"type": "shared_fs", "host_path": str(data_dir)},
                    {"type": "shared_fs", "host_path": "/", "storage_path": str(data_dir)},
                    {"type": "shared_fs", "host_path": str(data_dir / "checkpoints"), "storage_path": "planted"},
                    {"type": "shared_fs", "host_path": str(data_dir / "checkpoints" / ".." / "work")},
                    {"type": "shared_fs", "host_path": "/tmp"}):
        message = refused(400, bob.post, "/experiments", {"config": config(checkpoint_storage=storage),
                                                          "model_definition": model_def()})
        assert roots in message and "checkpoint_storage." in message, message
    # bob reports checkpoint "ids" that name the master's files: refused; only UUIDs are checkpoint ids.
    exp_b = create(bob, activate=False, max_trials=1)
    trial_b = bob.get(f"/experiments/{exp_b}")["trials"][0]["id"]
    for bad in ("checkpoints", "../determined.db", "..", "determined.db", str(uuid.uuid4()).upper(),
                uuid.uuid4().hex, "x" * 100_000):
        message = refused(400, bob.post, f"/trials/{trial_b}/checkpoints", {"uuid": bad, "steps_completed": 1})
        assert "canonical form" in message and len(message) < 2000, "the input is not echoed whole"
    own, latest = str(uuid.uuid4()), str(uuid.uuid4())
    bob.post(f"/trials/{trial_b}/checkpoints", {"uuid": own, "steps_completed": 1, "resources": {}})
    bob.post(f"/trials/{trial_b}/checkpoints", {"uuid": latest, "steps_completed": 2, "resources": {}})
    refused(409, bob.post, f"/trials/{trial_b}/checkpoints", {"uuid": ckpt["uuid"], "steps_completed": 3})
    bob.post(f"/experiments/{exp_b}/kill")  # ended: its checkpoint GC runs
    wait_for(lambda: bob.get(f"/checkpoints/{own}")["checkpoint"]["state"] == "DELETED", 30, "bob's GC")

    # Everything alice and the master stored is intact: the database answers, her model's files download.
    assert (data_dir / "determined.db").exists() or team.server.db
    version = alice.get("/models/alices-model/versions")["versions"][-1]
    assert version["checkpoint"]["uuid"] == ckpt["uuid"] and version["checkpoint"]["state"] == "COMPLETED"
    with tarfile.open(fileobj=io.BytesIO(b"".join(alice.stream(f"/checkpoints/{ckpt['uuid']}/files")))) as tar:
        assert tar.extractfile("state").read() == f"trial {ckpt['trial_id']} steps 20".encode()  # type: ignore[union-attr]
    assert (data_dir / "checkpoints" / "planted").is_symlink(), "GC never touched the planted link"


def test_storage_secrets_are_hidden_from_everyone_but_the_trial_that_uses_them(team: Team, tmp_path: pathlib.Path) -> None:
    alice, bob = team.session("alice"), team.session("bob")
    storage = {"type": "s3", "bucket": "alice-bucket", "access_key": SECRETS[0], "secret_key": SECRETS[1],
               "endpoint_url": "http://127.0.0.1:9"}
    slow = ["FAKE_SLEEP=0.5", f"WANDB_API_KEY={SECRETS[3]}", "PLAIN_SETTING=visible"]
    exp_s = create(alice, max_trials=1, length=400, checkpoint_storage=storage, data={"secrets": {"api": SECRETS[2]}},
                   environment={"environment_variables": slow, "registry_auth": {"username": "a", "password": SECRETS[4]}})
    exp_t = create(bob, max_trials=1, length=400, environment=fake_env(sleep=0.5))
    trials = {e: bob.get(f"/experiments/{e}")["trials"][0]["id"] for e in (exp_s, exp_t)}
    alice_ckpt = str(uuid.uuid4())
    alice.post(f"/trials/{trials[exp_s]}/checkpoints", {"uuid": alice_ckpt, "steps_completed": 1, "resources": {}})
    alice.post("/models/alices-s3-model", {})
    alice.post("/models/alices-s3-model/versions", {"checkpoint_uuid": alice_ckpt})
    pids = wait_for(lambda: (lambda p: p if set(trials.values()) <= set(p) else None)(team.server.trial_pids()), 30,
                    "both trials running")
    tokens = {tid: _environ(pid)["DET_SESSION_TOKEN"] for tid, pid in pids.items() if tid in trials.values()}

    answers: List[Any] = [
        bob.get(f"/experiments/{exp_s}"), bob.get("/experiments"), alice.get(f"/experiments/{exp_s}"),
        bob.get(f"/checkpoints/{alice_ckpt}"), bob.get(f"/experiments/{exp_s}/checkpoints"),
        bob.get("/models/alices-s3-model/versions"), bob.get(f"/trials/{trials[exp_s]}/context"),
        bob.get(f"/trials/{trials[exp_s]}"),
        Session(team.server.url, token=tokens[trials[exp_t]]).get(f"/trials/{trials[exp_s]}/context"),
        Session(team.server.url, token=tokens[trials[exp_t]]).get(f"/experiments/{exp_s}"),
    ]
    bob.login("bob", "bob-pw")  # cached for the `det` command below
    env = {**os.environ, "DET_MASTER": team.server.url, "DET_USER": "bob"}
    cli = subprocess.run([sys.executable, "-m", "determined.cli.main", "experiment", "describe", "--json", str(exp_s)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert cli.returncode == 0, cli.stderr
    answers.append(cli.stdout)
    text = repr(answers)
    assert "alice-bucket" in text and "PLAIN_SETTING=visible" in text and "WANDB_API_KEY=********" in text
    for secret in SECRETS:
        assert secret not in text, f"{secret} leaked"
    # The trial that uses them reads them.
    own = Session(team.server.url, token=tokens[trials[exp_s]]).get(f"/trials/{trials[exp_s]}/context")["config"]
    assert own["checkpoint_storage"]["secret_key"] == SECRETS[1] and own["data"]["secrets"]["api"] == SECRETS[2]
    for exp_id in (exp_s, exp_t):
        bob_or_alice = alice if exp_id == exp_s else bob
        bob_or_alice.post(f"/experiments/{exp_id}/kill")
    wait_for(lambda: state(alice, exp_s) == "CANCELED" and state(bob, exp_t) == "CANCELED", 30, "both killed")
    for secret in SECRETS:
        assert secret not in team.server.output(), f"{secret} is in the master's log"


def _environ(pid: int) -> Dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as f:
        items = [item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item]
    return {k.decode(): v.decode() for k, v in items}


def test_a_200_mib_log_line_and_a_flood_are_capped(team: Team) -> None:
    bob = team.session("bob")
    big = 200 * 1024 * 1024
    exp_id = create(bob, max_trials=1, length=10, environment=fake_env(print_bytes=big, print_lines=4000))
    wait_for(lambda: state(bob, exp_id) == "COMPLETED", 120, "the flooding trial")
    trial_id = bob.get(f"/experiments/{exp_id}")["trials"][0]["id"]
    logs: List[Dict[str, Any]] = []
    offset = 0
    while True:
        page = bob.get(f"/trials/{trial_id}/logs", {"offset": offset, "limit": 1000})
        logs += page["logs"]
        if not page["logs"]:
            break
        offset = page["next_offset"]
    messages = [entry["message"] for entry in logs]
    [long_line] = [m for m in messages if m.startswith("xxxx")]
    assert len(long_line.encode()) < LINE_LIMIT + 200
    assert f"[{big - LINE_LIMIT} bytes cut: the line was longer than the 4 KiB limit]" in long_line
    assert "after the long line" in messages, "the line after the long one is kept"
    assert sum(len(m) for m in messages) < TRIAL_LOG_LIMIT + 10_000
    assert any("reached the limit of 256 KiB" in m for m in messages)
    [dropped] = [m for m in messages if "dropped: over the trial's log limit" in m]
    kept = sum(1 for m in messages if m.startswith("line "))
    assert int(re.search(r"(\d+) log line", dropped).group(1)) >= 4000 - kept  # type: ignore[union-attr]
    peak = _peak_rss_mib(team.server.pid)
    assert peak < 400, f"the master's memory peaked at {peak} MiB while a 200 MiB line went through"


def _peak_rss_mib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
    return 0


def test_zz_a_huge_search_is_refused_a_big_one_starts_lazily_and_sigterm_stops_the_master(
        team: Team, capsys: pytest.CaptureFixture) -> None:
    """Runs last in this module: it stops the shared server with SIGTERM."""
    bob, alice = team.session("bob"), team.session("alice")
    started = time.monotonic()
    message = refused(400, bob.post, "/experiments", {"config": config(max_trials=10**9), "model_definition": model_def()})
    refused_s = time.monotonic() - started
    assert "1000000000 trials, more than the 10000" in message and "database row" in message

    # The biggest allowed search: created at once, its trials as the 2 slots allow; other writers do not wait.
    latencies: List[float] = []
    stop = threading.Event()

    def other_writer() -> None:
        while not stop.is_set():
            t0 = time.monotonic()
            alice.post(f"/models/timing-{len(latencies)}", {})
            latencies.append(time.monotonic() - t0)

    writer = threading.Thread(target=other_writer)
    writer.start()
    try:
        durations = {}
        ids = {}
        for name, searcher in (("random", {}), ("adaptive_asha", {"name": "adaptive_asha", "max_length": {"batches": 256}})):
            t0 = time.monotonic()
            ids[name] = create(bob, max_trials=10_000, length=256, searcher=searcher, environment=fake_env(sleep=0.2))
            durations[name] = time.monotonic() - t0
    finally:
        stop.set()
        writer.join()
    for name, exp_id in ids.items():
        described = bob.get(f"/experiments/{exp_id}")
        assert described["experiment"]["state"] == "ACTIVE" and 1 <= len(described["trials"]) <= 16, name
    with capsys.disabled():
        print(f"\nsearch of 10^9 trials refused in {refused_s * 1000:.0f} ms; creation of a 10,000-trial search: "
              f"random {durations['random'] * 1000:.0f} ms, adaptive_asha {durations['adaptive_asha'] * 1000:.0f} ms; "
              f"another user's write meanwhile: max {max(latencies) * 1000:.0f} ms over {len(latencies)} requests")
    assert max(durations.values()) < 5.0 and max(latencies) < 5.0, "no request waits seconds for the lock"

    # SIGTERM while another such search is being created: the master stops promptly, exit status 0.
    creating = threading.Thread(target=lambda: _try(lambda: create(bob, max_trials=10_000, length=256)))
    creating.start()
    t0 = time.monotonic()
    import signal

    assert team.server.signal(signal.SIGTERM, timeout=60) == 0
    stopped_s = time.monotonic() - t0
    creating.join()
    with capsys.disabled():
        print(f"SIGTERM during the creation of a 10,000-trial search: the master stopped in {stopped_s:.1f} s")
    assert stopped_s < 30


def _try(call: Any) -> None:
    try:
        call()
    except errors.DeterminedError:
        pass
