import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from determined import errors, storage
from determined.storage import _shared_fs


def _make_tree(root: pathlib.Path) -> None:
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "a.txt").write_text("alpha")
    (root / "sub" / "b.bin").write_bytes(b"\x00" * 1000)
    (root / "sub" / "deeper" / "c.txt").write_text("gamma")


def test_round_trip(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "src"
    _make_tree(src)
    mgr = storage.SharedFSStorageManager(str(tmp_path / "store"))
    assert not mgr.exists("ckpt-1")
    mgr.upload(str(src), "ckpt-1")
    assert mgr.exists("ckpt-1")
    assert (tmp_path / "store" / "ckpt-1" / "sub" / "deeper" / "c.txt").read_text() == "gamma"
    assert [p.name for p in (tmp_path / "store").iterdir()] == ["ckpt-1"]  # no staging leftovers

    dst = tmp_path / "dst"
    mgr.download("ckpt-1", str(dst))
    assert storage.directory_resources(str(dst)) == storage.directory_resources(str(src)) == {
        "a.txt": 5,
        "sub/": 0,
        "sub/b.bin": 1000,
        "sub/deeper/": 0,
        "sub/deeper/c.txt": 5,
    }
    with mgr.restore_path("ckpt-1") as path:
        assert (path / "a.txt").read_text() == "alpha"

    with pytest.raises(errors.DeterminedError, match="already exists"):
        mgr.upload(str(src), "ckpt-1")
    mgr.delete("ckpt-1")
    assert not mgr.exists("ckpt-1")
    assert list((tmp_path / "store").iterdir()) == []
    mgr.delete("ckpt-1")  # deleting twice is fine
    with pytest.raises(errors.DeterminedError, match="not in storage"):
        mgr.download("ckpt-1", str(tmp_path / "again"))


def test_base_restore_path_downloads_to_a_temporary_dir(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "src"
    _make_tree(src)
    mgr = storage.SharedFSStorageManager(str(tmp_path / "store"))
    mgr.upload(str(src), "x")
    with storage.StorageManager.restore_path(mgr, "x") as path:
        assert path != tmp_path / "store" / "x"
        assert (path / "sub" / "b.bin").stat().st_size == 1000
    assert not path.exists()


@pytest.mark.parametrize("bad", ["../escape", "/abs", "", "a/b", ".hidden"])
def test_rejects_unsafe_ids(tmp_path: pathlib.Path, bad: str) -> None:
    mgr = storage.SharedFSStorageManager(str(tmp_path))
    with pytest.raises(errors.DeterminedError, match="invalid checkpoint storage id"):
        mgr.exists(bad)


def test_failure_mid_upload_leaves_no_uuid_dir(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = tmp_path / "src"
    _make_tree(src)
    copied = []
    real_copy = _shared_fs.shutil.copyfile

    def failing_copy(a, b):  # type: ignore[no-untyped-def]
        if copied:
            raise OSError(28, "No space left on device")
        copied.append(a)
        return real_copy(a, b)

    monkeypatch.setattr(_shared_fs.shutil, "copyfile", failing_copy)
    mgr = storage.SharedFSStorageManager(str(tmp_path / "store"))
    with pytest.raises(OSError, match="No space left"):
        mgr.upload(str(src), "the-uuid")
    assert copied  # it did fail midway
    assert not mgr.exists("the-uuid")
    assert list((tmp_path / "store").iterdir()) == []


def test_process_killed_mid_upload_leaves_no_uuid_dir(tmp_path: pathlib.Path) -> None:
    src = tmp_path / "src"
    _make_tree(src)
    store = tmp_path / "store"
    script = textwrap.dedent(
        f"""
        import os
        from determined.storage import _shared_fs, SharedFSStorageManager
        real = _shared_fs.shutil.copyfile
        count = [0]
        def dying_copy(a, b):
            count[0] += 1
            if count[0] == 2:
                os._exit(9)  # the process dies with one file copied, no cleanup runs
            return real(a, b)
        _shared_fs.shutil.copyfile = dying_copy
        SharedFSStorageManager({str(store)!r}).upload({str(src)!r}, "the-uuid")
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 9, proc.stderr
    names = [p.name for p in store.iterdir()]
    assert "the-uuid" not in names
    assert len(names) == 1 and names[0].startswith(".staging-the-uuid-")
    assert not storage.SharedFSStorageManager(str(store)).exists("the-uuid")


def test_build_storage_manager_paths(tmp_path: pathlib.Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    mgr = storage.build_storage_manager({"type": "shared_fs", "host_path": str(host), "storage_path": "ckpts"})
    assert isinstance(mgr, storage.SharedFSStorageManager)
    assert mgr.base_path == (host / "ckpts").resolve()

    inside = host / "inner" / "dir"
    mgr = storage.build_storage_manager({"type": "shared_fs", "host_path": str(host), "storage_path": str(inside)})
    assert mgr.base_path == inside.resolve()

    mgr = storage.build_storage_manager({"type": "shared_fs", "host_path": str(host)})
    assert mgr.base_path == host.resolve()

    with pytest.raises(errors.DeterminedError, match="outside host_path"):
        storage.build_storage_manager({"type": "shared_fs", "host_path": str(host), "storage_path": "/etc"})
    with pytest.raises(errors.DeterminedError, match="outside host_path"):
        storage.build_storage_manager({"type": "shared_fs", "host_path": str(host), "storage_path": "../x"})
    with pytest.raises(errors.DeterminedError, match="host_path is required"):
        storage.build_storage_manager({"type": "shared_fs"})
    with pytest.raises(errors.DeterminedError, match="must be an absolute path"):
        storage.build_storage_manager({"type": "shared_fs", "host_path": "relative/dir"})


def test_build_storage_manager_unsupported_types() -> None:
    with pytest.raises(errors.DeterminedError, match=r"'gcs' is not supported; use shared_fs, directory or s3"):
        storage.build_storage_manager({"type": "gcs", "bucket": "b"})
    with pytest.raises(errors.DeterminedError, match="no checkpoint_storage configured"):
        storage.build_storage_manager(None)


def test_directory_storage_writes_into_its_container_path(tmp_path: pathlib.Path) -> None:
    # Determined 0.26.3's `directory` type: the trial writes checkpoints straight into a directory.
    src = tmp_path / "src"
    _make_tree(src)
    mgr = storage.build_storage_manager({"type": "directory", "container_path": str(tmp_path / "ckpts")})
    mgr.upload(str(src), "ckpt-1")
    assert (tmp_path / "ckpts" / "ckpt-1" / "sub" / "deeper" / "c.txt").read_text() == "gamma"
    with pytest.raises(errors.DeterminedError, match="container_path 'rel' must be an absolute directory"):
        storage.build_storage_manager({"type": "directory", "container_path": "rel"})


def test_upload_of_missing_dir_is_a_clear_error(tmp_path: pathlib.Path) -> None:
    mgr = storage.SharedFSStorageManager(str(tmp_path / "store"))
    with pytest.raises(errors.DeterminedError, match="is not a directory"):
        mgr.upload(str(tmp_path / "nope"), "x")
    assert not os.path.exists(tmp_path / "store" / "x")


def test_store_path_writes_in_place_and_publishes_only_on_success(tmp_path: pathlib.Path) -> None:
    mgr = storage.SharedFSStorageManager(str(tmp_path / "store"))
    with mgr.store_path("ok") as path:
        assert path.parent == mgr.base_path and not mgr.exists("ok")
        (path / "sub").mkdir()
        (path / "sub" / "w.bin").write_bytes(b"x" * 1000)
    assert (mgr.path_of("ok") / "sub" / "w.bin").read_bytes() == b"x" * 1000
    with pytest.raises(RuntimeError):
        with mgr.store_path("bad") as path:
            (path / "half").write_bytes(b"y")
            raise RuntimeError("the writer failed")
    assert not mgr.exists("bad")
    assert sorted(p.name for p in mgr.base_path.iterdir()) == ["ok"], "no staging directory is left behind"
    with pytest.raises(errors.DeterminedError, match="already exists"):
        with mgr.store_path("ok"):
            pass
