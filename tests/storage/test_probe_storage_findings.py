"""Findings 1, 5 and 6 of issue 33's security probe, tried again as the probe did.

1. A trial's links: a checkpoint directory that is a link to the master's data dir, links inside a checkpoint to a
   file outside it (directly, or through another link and `..`): the master neither streams nor copies what they
   point at, and the SDK's downloads never write it.
5. `type: directory` storage goes through the storage roots, at submission and again before GC deletes.
6. S3 `endpoint_url`: only AWS's and the admin's endpoints; the master never signs with its own AWS key; `/files`
   streams a hostile endpoint's endless object without a temporary file and stops when the client goes.

The master runs in-process with a server's settings (storage roots, allowed S3 endpoints), as `det master up`
builds it; the /files stream runs on a real HTTP server (uvicorn, 127.0.0.1) so that a client can hang up.
"""
import http.server
import io
import json
import os
import pathlib
import socket
import tarfile
import tempfile
import threading
import uuid
from typing import Any, Dict, Iterator, List, Optional, Sequence

import httpx
import pytest

from determined import errors
from determined.common.api import Session
from determined.experimental.client import Checkpoint, DownloadMode
from determined.master import create_app
from determined.master.security import users
from determined.master.storage import gc
from determined.master.storage.storage_roots import default_roots
from determined.storage import S3StorageManager, SharedFSStorageManager
from tests.auth._helpers import InProcessMaster, add_user
from tests.master._helpers import config, model_def
from tests.storage import _moto

moto_s3 = _moto.moto_s3
SECRET = b"TOP-SECRET root-only bytes"
MASTER_KEY = "AKIAMASTEROWNKEY0001"
KEEP_NOTHING = {"save_experiment_best": 0, "save_trial_best": 0, "save_trial_latest": 0}  # GC deletes every one


@pytest.fixture(autouse=True)
def cheap_password_hashes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(users, "_SCRYPT_N", 2**10)


class Master(InProcessMaster):
    """The app over `data_dir`: with a server's settings (`server=True`: the default storage root, `endpoints`)
    or as the embedded master (no roots: what an experiment stored before these checks could hold)."""

    def __init__(self, data_dir: pathlib.Path, *, server: bool = True, endpoints: Sequence[str] = ()) -> None:
        self.app = create_app(data_dir, run_scheduler=False,
                              storage_roots=default_roots(data_dir) if server else None,
                              storage_endpoints=list(endpoints) if server else None)
        self.master = self.app.state.master

    def users(self) -> Dict[str, Session]:
        admin = self.session("admin")
        for name in ("alice", "bob"):
            try:
                add_user(admin, name, f"{name}-pw")
            except errors.APIError:
                pass  # created by an earlier master on the same data dir
        return {"admin": admin, "alice": self.session("alice", "alice-pw"), "bob": self.session("bob", "bob-pw")}


def refused(status: int, call: Any, *args: Any) -> str:
    with pytest.raises(errors.APIError) as info:
        call(*args)
    assert info.value.status_code == status, str(info.value)
    return str(info.value) + " " + " ".join(info.value.problems or [])


def experiment(session: Session, storage: Dict[str, Any]) -> Dict[str, int]:
    body = {"config": config(max_trials=1, checkpoint_storage=storage), "model_definition": model_def(),
            "activate": False}
    exp_id = int(session.post("/experiments", body)["experiment"]["id"])
    return {"experiment": exp_id, "trial": int(session.get(f"/experiments/{exp_id}")["trials"][0]["id"])}


def report(session: Session, ids: Dict[str, int], ckpt: str, resources: Optional[Dict[str, int]] = None) -> None:
    session.post(f"/trials/{ids['trial']}/checkpoints",
                 {"uuid": ckpt, "steps_completed": 1, "resources": resources or {}})


def tar_members(session: Session, ckpt: str) -> Dict[str, Any]:
    """`{name: bytes of a file, ("link", target) of a link, "dir"}` of the master's /files answer."""
    out: Dict[str, Any] = {}
    with tarfile.open(fileobj=io.BytesIO(b"".join(session.stream(f"/checkpoints/{ckpt}/files")))) as tar:
        for m in tar.getmembers():
            f = tar.extractfile(m) if m.isfile() else None
            out[m.name] = f.read() if f else ("link", m.linkname) if m.issym() else "dir" if m.isdir() else m.type
    return out


def regular_file_bytes(root: pathlib.Path) -> List[bytes]:
    """The contents of every regular file under `root` (links not followed)."""
    found = []
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            path = pathlib.Path(dirpath, name)
            if not path.is_symlink():
                found.append(path.read_bytes())
    return found


# -- finding 1: links -----------------------------------------------------------------------------------------------


def test_a_checkpoint_directory_that_links_to_the_data_dir_is_refused_when_reported_and_when_read(
        tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data"
    m = Master(data)
    bob = m.users()["bob"]
    root = data / "checkpoints"
    root.mkdir(exist_ok=True)
    ids = experiment(bob, {"type": "shared_fs", "host_path": str(root)})
    planted = str(uuid.uuid4())
    (root / planted).symlink_to(data, target_is_directory=True)
    message = refused(400, report, bob, ids, planted)
    assert "symbolic link" in message and planted in message, message

    # a real checkpoint, reported, then swapped for a link to the data dir: the master does not read through it
    swapped = str(uuid.uuid4())
    (root / swapped).mkdir()
    (root / swapped / "state").write_text("weights")
    report(bob, ids, swapped)
    bob.post(f"/experiments/{ids['experiment']}/kill")
    (root / swapped).rename(root / "aside")
    (root / swapped).symlink_to(data, target_is_directory=True)
    message = refused(409, lambda: b"".join(bob.stream(f"/checkpoints/{swapped}/files")))
    assert "symbolic link" in message, message
    refused(400, bob.delete, f"/checkpoints/{swapped}")
    assert (data / "determined.db").exists() and (root / swapped).is_symlink(), "nothing deleted through the link"


def test_links_inside_a_checkpoint_are_never_streamed_copied_or_downloaded_as_their_targets(
        tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data"
    m = Master(data)
    sessions = m.users()
    alice, bob = sessions["alice"], sessions["bob"]
    root = data / "checkpoints"
    root.mkdir(exist_ok=True)
    (tmp_path / "outside").mkdir()
    secret = tmp_path / "outside" / "root-only.txt"
    secret.write_bytes(SECRET)
    secret.chmod(0o600)
    (root / "beside.txt").write_bytes(SECRET)  # beside the checkpoint, in the storage root
    ckpt = str(uuid.uuid4())
    d = root / ckpt
    (d / "sub").mkdir(parents=True)
    (d / "model.bin").write_bytes(b"weights")
    (d / "inside").symlink_to("model.bin")
    (d / "secret").symlink_to(secret)
    (d / "sub" / "up").symlink_to("..")  # the checkpoint itself: inside
    (d / "esc").symlink_to("sub/up/../beside.txt")  # lexically inside, but `up` is the checkpoint: out of it
    (d / "dirlink").symlink_to(tmp_path / "outside", target_is_directory=True)
    ids = experiment(bob, {"type": "shared_fs", "host_path": str(root)})
    report(bob, ids, ckpt, {"model.bin": 7})
    bob.post(f"/experiments/{ids['experiment']}/kill")

    members = tar_members(alice, ckpt)
    assert set(members) == {"model.bin", "inside", "sub", "sub/up"}, members
    assert members["inside"] == ("link", "model.bin") and members["sub/up"] == ("link", "..")
    assert members["model.bin"] == b"weights"

    record = alice.get(f"/checkpoints/{ckpt}")["checkpoint"]
    for mode in (DownloadMode.DIRECT, DownloadMode.MASTER):  # DIRECT: `det checkpoint download`'s default here
        local = tmp_path / f"download-{mode.value}"
        Checkpoint._from_json(record, {}, alice).download(str(local), mode=mode)
        assert SECRET not in regular_file_bytes(local), f"{mode}: a link's target was written"
        assert os.readlink(local / "inside") == "model.bin" and (local / "model.bin").read_bytes() == b"weights"
        assert not any(os.path.lexists(local / n) for n in ("secret", "esc", "dirlink")), mode

    answer = bob.post(f"/checkpoints/{ckpt}/remove_files", {"globs": ["model.bin"]})
    assert answer["removed"] == ["model.bin"] and sorted(answer["skipped_links"]) == ["dirlink", "esc", "secret"]
    assert answer["state"] == "PARTIALLY_DELETED"
    assert SECRET not in regular_file_bytes(d), "the master copied a link's target into the checkpoint"
    assert os.readlink(d / "inside") == "model.bin" and os.readlink(d / "sub" / "up") == ".."
    assert secret.read_bytes() == SECRET and (root / "beside.txt").read_bytes() == SECRET


def test_a_directory_swapped_for_a_link_while_a_checkpoint_is_read_is_not_read_through(tmp_path: pathlib.Path) -> None:
    storage = SharedFSStorageManager(str(tmp_path / "storage"))
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "w.bin").write_bytes(b"weights")
    storage.upload(str(src), "ckpt")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "w.bin").write_bytes(SECRET)
    stored = tmp_path / "storage" / "ckpt"

    entries = storage.read_files("ckpt")
    first = next(entries)  # the checkpoint is listed: sub/ is a directory
    assert (first.path, first.kind) == ("sub", "dir")
    (stored / "sub").rename(stored / "aside")
    (stored / "sub").symlink_to(tmp_path / "outside", target_is_directory=True)  # swapped before the file is read
    entry = next(entries)
    assert entry.path == "sub/w.bin" and entry.open is not None
    with pytest.raises(errors.DeterminedError, match="changed while it was read"):
        entry.open()
    assert list(entries) == []
    with pytest.raises(errors.DeterminedError, match="symbolic link"):  # and the checkpoint itself, as a link
        (stored.parent / "linked").symlink_to(stored, target_is_directory=True)
        list(storage.read_files("linked"))


# -- finding 5: directory storage -----------------------------------------------------------------------------------


def test_directory_storage_is_held_to_the_storage_roots_at_submission_and_at_gc(tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data"
    bob = Master(data).users()["bob"]
    roots = str(data / "checkpoints")
    for path in ("/", str(data), str(tmp_path / "elsewhere")):
        message = refused(400, experiment, bob, {"type": "directory", "container_path": path})
        assert "checkpoint_storage.container_path" in message and roots in message, message
    experiment(bob, {"type": "directory", "container_path": str(data / "checkpoints" / "bob")})  # inside: accepted

    # An experiment stored before the check (an embedded master has no roots), in another directory whose <uuid>
    # subdirectory a trial claimed: the server's GC and deletion leave it alone.
    other = tmp_path / "other-team"
    claimed = str(uuid.uuid4())
    (other / claimed).mkdir(parents=True)
    (other / claimed / "precious").write_text("not bob's")
    embedded_bob = Master(data, server=False).users()["bob"]
    ids = experiment(embedded_bob, {"type": "directory", "container_path": str(other), **KEEP_NOTHING})
    report(embedded_bob, ids, claimed)

    server = Master(data)
    bob = server.users()["bob"]
    bob.post(f"/experiments/{ids['experiment']}/kill")  # ended: its GC runs (at once, in-process)
    assert (other / claimed / "precious").read_text() == "not bob's"
    message = refused(400, bob.delete, f"/checkpoints/{claimed}")
    assert "container_path" in message and roots in message, message
    assert gc.run_gc(server.master, ids["experiment"]) == []
    assert (other / claimed / "precious").read_text() == "not bob's"
    assert bob.get(f"/checkpoints/{claimed}")["checkpoint"]["state"] == "COMPLETED"


# -- finding 6: S3 endpoints ----------------------------------------------------------------------------------------


class HostileS3(http.server.ThreadingHTTPServer):
    """An 'S3 server' a user chose: records every request, lists one checkpoint whose object is `size` bytes of
    zeros (served until the reader hangs up), and says yes to deletes."""

    daemon_threads = True

    def __init__(self, size: int) -> None:
        self.size = size
        self.requests: List[Dict[str, str]] = []
        self.sent = 0
        self.object_done = threading.Event()
        super().__init__(("127.0.0.1", 0), _HostileHandler)
        self.thread = threading.Thread(target=self.serve_forever, name="hostile-s3", daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self.thread.join(30)


class _HostileHandler(http.server.BaseHTTPRequestHandler):
    server: HostileS3
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _record(self) -> None:
        self.server.requests.append({"method": self.command, "path": self.path,
                                     "authorization": self.headers.get("Authorization") or ""})
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)

    def _answer(self, status: int, body: bytes, kind: str = "application/xml") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._record()
        if self.path.endswith("/.det-complete"):
            self._answer(200, json.dumps({"resources": {"big.bin": self.server.size}}).encode(), "application/json")
        elif self.path.split("?")[0].endswith("/big.bin"):
            first, last = 0, self.server.size - 1
            ranged = (self.headers.get("Range") or "").replace("bytes=", "").split("-")
            if len(ranged) == 2 and ranged[0]:  # a part of a multipart download
                first, last = int(ranged[0]), min(int(ranged[1] or last), last)
            self.send_response(206 if ranged[0] else 200)
            self.send_header("Content-Length", str(last + 1 - first))
            self.end_headers()
            left = last + 1 - first
            try:
                while left > 0:
                    chunk = bytes(min(left, 1 << 16))
                    self.wfile.write(chunk)
                    self.server.sent += len(chunk)
                    left -= len(chunk)
            except OSError:
                pass
            finally:
                self.server.object_done.set()
                self.close_connection = True
        else:  # a listing: nothing
            self._answer(200, b'<?xml version="1.0"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                              b"<KeyCount>0</KeyCount><IsTruncated>false</IsTruncated></ListBucketResult>")

    def do_HEAD(self) -> None:
        self._record()
        self.send_response(200)
        self.send_header("Content-Length", str(self.server.size))
        self.end_headers()

    def do_DELETE(self) -> None:
        self._record()
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        self._record()
        self._answer(200, b'<?xml version="1.0"?><DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
                          b"</DeleteResult>")


@pytest.fixture
def hostile() -> Iterator[HostileS3]:
    server = HostileS3(size=300 * 1024 * 1024)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def master_aws_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """The master's own AWS credentials, in its environment (as on an EC2 host or a CI runner)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", MASTER_KEY)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "the-masters-own-secret")


def test_s3_endpoints_must_be_allowed_and_never_get_the_masters_own_key(
        tmp_path: pathlib.Path, hostile: HostileS3, moto_s3: _moto.MotoS3, master_aws_key: None) -> None:
    data = tmp_path / "data"
    bob = Master(data, endpoints=[moto_s3.endpoint_url]).users()["bob"]
    for endpoint in (hostile.url, "http://169.254.169.254", "http://user@127.0.0.1:1/x"):
        message = refused(400, experiment, bob, {"type": "s3", "bucket": "b", "endpoint_url": endpoint})
        assert "checkpoint_storage.endpoint_url" in message and "checkpoint_storage_endpoints" in message, message
    experiment(bob, {"type": "s3", "bucket": "b"})  # AWS
    experiment(bob, {"type": "s3", "bucket": "b", "endpoint_url": "https://s3.eu-west-1.amazonaws.com"})

    # An experiment stored before the check (no roots, no endpoint list): the server sends its endpoint nothing.
    embedded_bob = Master(data, server=False).users()["bob"]
    ids = experiment(embedded_bob, {"type": "s3", "bucket": "b", "endpoint_url": hostile.url, **KEEP_NOTHING})
    ckpts = [str(uuid.uuid4()) for _ in range(2)]
    for ckpt in ckpts:
        report(embedded_bob, ids, ckpt, {"big.bin": hostile.size})
    server = Master(data, endpoints=[moto_s3.endpoint_url])
    bob = server.users()["bob"]
    bob.post(f"/experiments/{ids['experiment']}/kill")  # ended: its GC runs (at once, in-process)
    assert "not an allowed endpoint" in refused(400, bob.delete, f"/checkpoints/{ckpts[0]}")
    assert "not an allowed endpoint" in refused(409, lambda: b"".join(bob.stream(f"/checkpoints/{ckpts[0]}/files")))
    assert gc.run_gc(server.master, ids["experiment"]) == []
    assert hostile.requests == [], "the master sent requests to an endpoint it does not allow"

    # Once the admin allows that endpoint, the master's requests carry no credentials of the master.
    bob = Master(data, endpoints=[hostile.url, moto_s3.endpoint_url]).users()["bob"]
    bob.delete(f"/checkpoints/{ckpts[0]}")
    assert hostile.requests and all(MASTER_KEY not in r["authorization"] for r in hostile.requests), hostile.requests

    # An allowed endpoint with the experiment's own keys (moto) works as before: stream, then delete.
    bucket = moto_s3.new_bucket()
    ids = experiment(bob, moto_s3.storage_config(bucket))
    ckpt, src = str(uuid.uuid4()), tmp_path / "ckpt"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "w.bin").write_bytes(b"moto weights")
    S3StorageManager(bucket, moto_s3.access_key, moto_s3.secret_key, moto_s3.endpoint_url).upload(str(src), ckpt)
    report(bob, ids, ckpt, {"sub/w.bin": 12})
    bob.post(f"/experiments/{ids['experiment']}/kill")
    assert tar_members(bob, ckpt)["sub/w.bin"] == b"moto weights"
    bob.delete(f"/checkpoints/{ckpt}")
    assert moto_s3.keys(bucket, ckpt) == []


class _Uvicorn:
    """An app served by uvicorn on 127.0.0.1 in a thread of the test."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()


def test_files_streams_a_hostile_endpoints_object_and_stops_when_the_client_goes(
        tmp_path: pathlib.Path, hostile: HostileS3, monkeypatch: pytest.MonkeyPatch, master_aws_key: None) -> None:
    scratch = tmp_path / "master-tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # where a download to a temporary file would go
    data = tmp_path / "data"
    master = Master(data, endpoints=[hostile.url])
    bob = master.users()["bob"]
    ids = experiment(bob, {"type": "s3", "bucket": "b", "endpoint_url": hostile.url})
    ckpt = str(uuid.uuid4())
    report(bob, ids, ckpt, {"big.bin": hostile.size})
    bob.post(f"/experiments/{ids['experiment']}/kill")

    served = _Uvicorn(master.app)
    try:
        received = 0
        with httpx.Client(base_url=served.url, timeout=60) as client:
            with client.stream("GET", f"/api/v1/checkpoints/{ckpt}/files",
                               headers={"Authorization": f"Bearer {bob.token}"}) as answer:
                assert answer.status_code == 200
                for chunk in answer.iter_raw():
                    received += len(chunk)
                    if received >= 2 * 1024 * 1024:
                        break  # the client gives up and hangs up
        assert hostile.object_done.wait(120), "the master kept reading the object after the client went"
    finally:
        served.stop()
    print(f"hostile endpoint sent {hostile.sent} bytes; the client took {received}")
    assert hostile.sent < 64 * 1024 * 1024, f"the master read {hostile.sent} bytes for a client that took {received}"
    assert list(scratch.iterdir()) == [], "the object went to a temporary file"
