"""S3StorageManager against a real moto S3 server (with IAM authentication on)."""
import json
import os
import pathlib
import sys
from typing import Any, Dict

import pytest

from determined import errors, storage
from determined.core._checkpoint import CheckpointContext
from determined.core._distributed import DistributedContext
from determined.storage import _s3
from tests.storage import _moto
from tests.storage._moto import MotoS3, free_port

moto_s3 = _moto.moto_s3  # the session fixture: one moto server for every module that uses it

MiB = 1024 * 1024


def _make_tree(root: pathlib.Path) -> Dict[str, bytes]:
    files = {
        "a.txt": b"alpha",
        "sub/b.bin": bytes(range(256)) * 40,
        "sub/deeper/c.txt": b"gamma",
        "big/weights.bin": os.urandom(11 * MiB + 123),  # more than two 5 MiB parts
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    (root / "empty-dir").mkdir()
    return files


def _manager(moto: MotoS3, bucket: str, **kw: Any) -> storage.S3StorageManager:
    return storage.S3StorageManager(
        bucket, moto.access_key, moto.secret_key, endpoint_url=moto.endpoint_url, multipart_bytes=5 * MiB, **kw
    )


def test_round_trip_exists_and_delete(moto_s3: MotoS3, tmp_path: pathlib.Path) -> None:
    bucket = moto_s3.new_bucket()
    src = tmp_path / "src"
    files = _make_tree(src)
    mgr = _manager(moto_s3, bucket)

    assert not mgr.exists("ckpt-1")
    mgr.upload(str(src), "ckpt-1")
    assert mgr.exists("ckpt-1")

    keys = moto_s3.keys(bucket)
    assert keys == sorted(["ckpt-1/" + r for r in files] + ["ckpt-1/big/", "ckpt-1/sub/", "ckpt-1/sub/deeper/",
                                                           "ckpt-1/empty-dir/", "ckpt-1/.det-complete"])
    marker = moto_s3.client().get_object(Bucket=bucket, Key="ckpt-1/.det-complete")["Body"].read()
    assert json.loads(marker) == {"resources": storage.directory_resources(str(src))}
    # The big file went up in parts (an S3 multipart ETag ends with "-<number of parts>").
    etag = moto_s3.client().head_object(Bucket=bucket, Key="ckpt-1/big/weights.bin")["ETag"]
    assert etag.strip('"').endswith("-3")

    dst = tmp_path / "dst"
    mgr.download("ckpt-1", str(dst))
    for rel, data in files.items():
        assert (dst / rel).read_bytes() == data
    assert (dst / "empty-dir").is_dir() and not any((dst / "empty-dir").iterdir())
    assert storage.directory_resources(str(dst)) == storage.directory_resources(str(src))

    with mgr.restore_path("ckpt-1") as path:
        assert (path / "sub" / "deeper" / "c.txt").read_bytes() == b"gamma"
        restored = path
    assert not restored.exists()

    with pytest.raises(errors.DeterminedError, match="already exists"):
        mgr.upload(str(src), "ckpt-1")

    mgr.delete("ckpt-1")
    assert not mgr.exists("ckpt-1")
    assert moto_s3.keys(bucket) == []
    mgr.delete("ckpt-1")  # deleting a missing id is fine
    with pytest.raises(errors.DeterminedError, match=r"checkpoint ckpt-1 is not in storage.*\.det-complete"):
        mgr.download("ckpt-1", str(tmp_path / "dst2"))


def test_delete_paginates_and_batches(
    moto_s3: MotoS3, tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small pages and batches stand in for S3's 1000 keys per listing page and per DeleteObjects request.
    monkeypatch.setattr(_s3, "_LIST_PAGE", 7)
    monkeypatch.setattr(_s3, "_DELETE_BATCH", 7)
    bucket = moto_s3.new_bucket()
    src = tmp_path / "many"
    src.mkdir()
    for i in range(19):
        (src / f"f{i:02d}").write_bytes(b"x")
    mgr = _manager(moto_s3, bucket)
    mgr.upload(str(src), "many")
    moto_s3.client().put_object(Bucket=bucket, Key="many-other/keep", Body=b"x")
    requests = {"ListObjectsV2": 0, "DeleteObjects": 0}

    def count(event_name: str, **_: Any) -> None:
        requests[event_name.split(".")[-1]] += 1

    for op in requests:
        mgr._client.meta.events.register(f"before-call.s3.{op}", count)
    mgr.delete("many")
    assert moto_s3.keys(bucket) == ["many-other/keep"]
    assert requests == {"ListObjectsV2": 3, "DeleteObjects": 3}  # 19 files = 7 + 7 + 5 (marker deleted first)


def test_prefix_is_honoured(moto_s3: MotoS3, tmp_path: pathlib.Path) -> None:
    bucket = moto_s3.new_bucket()
    src = tmp_path / "src"
    src.mkdir()
    (src / "model.pt").write_bytes(b"weights")
    team = _manager(moto_s3, bucket, prefix="/team/ckpts/")
    other = _manager(moto_s3, bucket, prefix="other")
    bare = _manager(moto_s3, bucket)

    team.upload(str(src), "c1")
    assert moto_s3.keys(bucket) == ["team/ckpts/c1/.det-complete", "team/ckpts/c1/model.pt"]
    assert team.exists("c1") and not other.exists("c1") and not bare.exists("c1")
    other.upload(str(src), "c1")
    team.delete("c1")
    assert moto_s3.keys(bucket) == ["other/c1/.det-complete", "other/c1/model.pt"]
    assert other.exists("c1")

    with pytest.raises(errors.DeterminedError, match=r"prefix '\.\./x' may not contain"):
        _manager(moto_s3, bucket, prefix="../x")


def test_wrong_credentials_are_clear_errors(moto_s3: MotoS3, tmp_path: pathlib.Path) -> None:
    bucket = moto_s3.new_bucket()
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("x")
    unknown = storage.S3StorageManager(bucket, "AKIANOTAKEY000000000", "nope", endpoint_url=moto_s3.endpoint_url)
    with pytest.raises(storage.S3StorageError) as info:
        unknown.upload(str(src), "c1")
    msg = str(info.value)
    assert "access key is not known" in msg and "checkpoint_storage.access_key / secret_key" in msg
    assert repr(bucket) in msg and moto_s3.endpoint_url in msg
    assert info.value.__suppress_context__ and info.value.__cause__ is None  # no botocore traceback attached

    bad_secret = storage.S3StorageManager(bucket, moto_s3.access_key, "wrong-secret", endpoint_url=moto_s3.endpoint_url)
    with pytest.raises(storage.S3StorageError, match="secret key does not match the access key"):
        bad_secret.exists("c1")
    with pytest.raises(storage.S3StorageError, match="secret key does not match"):
        bad_secret.download("c1", str(tmp_path / "d"))
    assert moto_s3.keys(bucket) == []

    with pytest.raises(errors.DeterminedError, match="access_key is set but secret_key is not"):
        storage.S3StorageManager(bucket, access_key="AKIA", endpoint_url=moto_s3.endpoint_url)


def test_missing_bucket_and_unreachable_endpoint(moto_s3: MotoS3, tmp_path: pathlib.Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    (src / "f").write_text("x")
    missing = _manager(moto_s3, "no-such-bucket-here")
    with pytest.raises(storage.S3StorageError, match=r"bucket 'no-such-bucket-here' at http://127\.0\.0\.1:\d+.*"
                                                     r"the bucket does not exist; create the bucket"):
        missing.upload(str(src), "c1")
    with pytest.raises(storage.S3StorageError, match="does not exist"):
        missing.exists("c1")

    dead = f"http://127.0.0.1:{free_port()}"
    unreachable = storage.S3StorageManager("b", "k", "s", endpoint_url=dead)
    with pytest.raises(storage.S3StorageError) as info:
        unreachable.exists("c1")
    assert "endpoint cannot be reached" in str(info.value) and dead in str(info.value)
    assert "checkpoint_storage.endpoint_url" in str(info.value)


def test_failed_upload_leaves_no_checkpoint(moto_s3: MotoS3, tmp_path: pathlib.Path) -> None:
    bucket = moto_s3.new_bucket()
    src = tmp_path / "src"
    _make_tree(src)
    mgr = _manager(moto_s3, bucket)
    calls = {"n": 0}

    def drop_third_put(**_: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 3:
            raise ConnectionResetError("connection dropped by the test")

    mgr._client.meta.events.register("before-call.s3.PutObject", drop_third_put)
    with pytest.raises(storage.S3StorageError, match="connection dropped by the test"):
        mgr.upload(str(src), "c1")
    assert calls["n"] >= 3
    assert not mgr.exists("c1")
    assert moto_s3.keys(bucket) == []  # what was written is cleaned up

    # Objects without the marker (an upload that died before cleaning up) are never a checkpoint.
    moto_s3.client().put_object(Bucket=bucket, Key="c2/model.pt", Body=b"half")
    assert not mgr.exists("c2")
    with pytest.raises(storage.S3StorageError, match=r"no \.det-complete marker"):
        mgr.download("c2", str(tmp_path / "dst"))


def test_damaged_checkpoint_is_refused(moto_s3: MotoS3, tmp_path: pathlib.Path) -> None:
    bucket = moto_s3.new_bucket()
    src = tmp_path / "src"
    src.mkdir()
    (src / "model.pt").write_bytes(b"0123456789")
    mgr = _manager(moto_s3, bucket)
    mgr.upload(str(src), "c1")
    moto_s3.client().put_object(Bucket=bucket, Key="c1/model.pt", Body=b"short")
    with pytest.raises(storage.S3StorageError, match="'model.pt' has 5 bytes, 10 were stored"):
        mgr.download("c1", str(tmp_path / "d1"))
    moto_s3.client().delete_object(Bucket=bucket, Key="c1/model.pt")
    with pytest.raises(storage.S3StorageError, match="incomplete.*'model.pt' is missing"):
        mgr.download("c1", str(tmp_path / "d2"))


def test_build_storage_manager_s3(moto_s3: MotoS3) -> None:
    assert storage.SUPPORTED_TYPES == ("shared_fs", "directory", "s3")
    mgr = storage.build_storage_manager({**moto_s3.storage_config("bkt", prefix="p/q"), "save_trial_best": 1})
    assert isinstance(mgr, storage.S3StorageManager)
    assert (mgr.bucket, mgr.prefix, mgr.endpoint_url) == ("bkt", "p/q", moto_s3.endpoint_url)
    assert mgr.key_prefix("abc") == "p/q/abc/"
    for kind in ("gcs", "hdfs", "azure"):
        with pytest.raises(errors.DeterminedError, match=f"'{kind}' is not supported; use shared_fs, directory or s3"):
            storage.build_storage_manager({"type": kind, "bucket": "b"})
    with pytest.raises(errors.DeterminedError, match="bucket is required"):
        storage.build_storage_manager({"type": "s3"})
    with pytest.raises(errors.DeterminedError, match="invalid checkpoint storage id"):
        mgr.exists("../escape")


def test_checkpoint_context_stores_and_restores_through_s3(moto_s3: MotoS3) -> None:
    bucket = moto_s3.new_bucket()
    ctx = CheckpointContext(_manager(moto_s3, bucket, prefix="exp"), None, 0, DistributedContext())
    with ctx.store_path({"steps_completed": 7, "framework": "torch"}) as (path, uuid):
        (path / "state").mkdir()
        (path / "state" / "model.bin").write_bytes(b"\x01\x02\x03")
    metadata_size = len(json.dumps({"framework": "torch", "steps_completed": 7}, indent=2, sort_keys=True))
    assert ctx.reported[0]["uuid"] == uuid and ctx.reported[0]["resources"] == {
        "state/": 0, "state/model.bin": 3, "metadata.json": metadata_size}  # 0.38 keeps the metadata in the files
    assert f"exp/{uuid}/.det-complete" in moto_s3.keys(bucket)
    with ctx.restore_path(uuid) as restored:
        assert (restored / "state" / "model.bin").read_bytes() == b"\x01\x02\x03"


def test_missing_boto3_names_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "boto3", None)
    with pytest.raises(errors.DeterminedError, match=r"pip install boto3.*s3. extra"):
        _s3.S3StorageManager("bucket")


def test_add_files_adds_batch_outputs_to_one_prefix_again_and_again(moto_s3: MotoS3, tmp_path: pathlib.Path) -> None:
    """Batch inference outputs (`upload_path()`): each call adds its files under the same id; no marker."""
    bucket = moto_s3.new_bucket()
    mgr = _manager(moto_s3, bucket, prefix="out")
    for i in range(2):
        src = tmp_path / f"src{i}"
        (src / "rank_1").mkdir(parents=True)
        (src / "rank_1" / f"batch_{i}.json").write_text(str(i))
        (src / "rank_1" / "same.txt").write_text(f"version {i}")
        mgr.add_files(str(src), "outputs")
    assert moto_s3.keys(bucket) == ["out/outputs/rank_1/batch_0.json", "out/outputs/rank_1/batch_1.json",
                                    "out/outputs/rank_1/same.txt"]
    body = moto_s3.client().get_object(Bucket=bucket, Key="out/outputs/rank_1/same.txt")["Body"].read()
    assert body == b"version 1"
    with pytest.raises(errors.DeterminedError, match="is not a directory"):
        mgr.add_files(str(tmp_path / "missing"), "outputs")
