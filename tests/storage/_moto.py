"""A real moto S3 server for tests: `moto_s3` is a session fixture; import it into any test module.

    from tests.storage import _moto
    moto_s3 = _moto.moto_s3  # in the test module: pytest finds the fixture by that name

The server (`moto_server` of the venv, a subprocess on 127.0.0.1 and a free port) runs with moto's IAM
authentication on: it creates one IAM user with an allow-all policy and its access key, and every later
request must be signed with that key, so wrong keys get real InvalidAccessKeyId / SignatureDoesNotMatch
answers. One server serves the whole pytest process however many modules import the fixture; it is stopped
by its pid when the last of them is torn down (or at exit).
"""
import atexit
import itertools
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional

import pytest

MOTO_SERVER = pathlib.Path(sys.executable).parent / "moto_server"
_ALLOW_ALL = '{"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}'
# Unauthenticated requests moto allows before it checks signatures: CreateUser, CreateAccessKey, PutUserPolicy.
_SETUP_REQUESTS = 3


@dataclass
class MotoS3:
    """A running moto S3 server and the credentials it accepts."""

    endpoint_url: str
    access_key: str
    secret_key: str
    pid: int

    def client(self, access_key: Optional[str] = None, secret_key: Optional[str] = None) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            region_name="us-east-1",
            aws_access_key_id=access_key or self.access_key,
            aws_secret_access_key=secret_key or self.secret_key,
        )

    def new_bucket(self, stem: str = "det-test") -> str:
        """Create a bucket with a unique name and return the name."""
        name = f"{stem}-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> List[str]:
        """Every key of `bucket` under `prefix`, sorted."""
        paginator = self.client().get_paginator("list_objects_v2")
        return sorted(o["Key"] for page in paginator.paginate(Bucket=bucket, Prefix=prefix) for o in page.get("Contents") or [])

    def storage_config(self, bucket: str, prefix: Optional[str] = None) -> Dict[str, Any]:
        """A `checkpoint_storage` config of type s3 for `bucket` on this server."""
        return {
            "type": "s3",
            "bucket": bucket,
            "access_key": self.access_key,
            "secret_key": self.secret_key,
            "endpoint_url": self.endpoint_url,
            "prefix": prefix,
        }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen, timeout: float) -> None:
    # Only TCP connects: an HTTP request would use up one of the unauthenticated setup requests.
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto_server exited with status {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"moto_server did not listen on 127.0.0.1:{port} within {timeout}s")


def stop_moto_server(proc: subprocess.Popen) -> None:
    """Stop a server of start_moto_server() by its pid (SIGTERM, then SIGKILL after 10 s)."""
    if proc.poll() is None:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


def start_moto_server(log_path: Optional[pathlib.Path] = None) -> "tuple[MotoS3, subprocess.Popen]":
    """Start a moto server with IAM auth and one allow-all user; returns it and its process."""
    if not MOTO_SERVER.exists():
        raise RuntimeError(f"{MOTO_SERVER} not found: install moto[server] into this venv")
    import boto3

    for attempt in itertools.count(1):
        port = free_port()
        log = open(log_path, "ab") if log_path else subprocess.DEVNULL
        proc = subprocess.Popen(
            [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL,
            env={**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(_SETUP_REQUESTS)},
        )
        if log_path:
            log.close()
        try:
            _wait_listening(port, proc, timeout=30)
            break
        except RuntimeError:
            stop_moto_server(proc)
            if attempt >= 3:  # the port was taken between free_port() and the bind: try another
                raise
    endpoint = f"http://127.0.0.1:{port}"
    try:
        iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1",
                           aws_access_key_id="setup", aws_secret_access_key="setup")
        iam.create_user(UserName="det-tests")
        key = iam.create_access_key(UserName="det-tests")["AccessKey"]
        iam.put_user_policy(UserName="det-tests", PolicyName="allow-all", PolicyDocument=_ALLOW_ALL)
    except BaseException:
        stop_moto_server(proc)
        raise
    return MotoS3(endpoint, key["AccessKeyId"], key["SecretAccessKey"], proc.pid), proc


_shared: Dict[str, Any] = {"server": None, "proc": None, "users": 0}


def _release() -> None:
    _shared["users"] -= 1
    if _shared["users"] <= 0 and _shared["proc"] is not None:
        stop_moto_server(_shared["proc"])
        _shared.update(server=None, proc=None, users=0)


def _stop_at_exit() -> None:
    if _shared["proc"] is not None:
        stop_moto_server(_shared["proc"])


atexit.register(_stop_at_exit)


@pytest.fixture(scope="session")
def moto_s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoS3]:
    """A moto S3 server shared by the whole test session."""
    if _shared["server"] is None:
        log = tmp_path_factory.mktemp("moto") / "moto_server.log"
        _shared["server"], _shared["proc"] = start_moto_server(log)
    _shared["users"] += 1
    try:
        yield _shared["server"]
    finally:
        _release()
