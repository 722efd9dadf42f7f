"""`Checkpoint.download()` by several processes into the same path at once (every rank of a batch inference calls
`model_version.checkpoint.download()` with its default path): none of them returns before the files it reads are
complete, and a download into a directory of other files keeps them."""
import concurrent.futures
import hashlib
import pathlib
import threading
from typing import Any, Dict

from determined.experimental.client import Checkpoint

UUID = "5b1c7d2e-0000-4000-8000-000000000001"


def stored_checkpoint(root: pathlib.Path) -> Dict[str, Any]:
    """A shared_fs storage holding a checkpoint of one big file and its code; the storage config."""
    ckpt = root / "storage" / UUID
    (ckpt / "code").mkdir(parents=True)
    (ckpt / "code" / "model_def.py").write_text("X = 1\n")
    (ckpt / "weights.bin").write_bytes(bytes(range(256)) * (24 * 1024))  # 6 MiB
    return {"type": "shared_fs", "host_path": str(root / "storage")}


def checkpoint(storage: Dict[str, Any]) -> Checkpoint:
    return Checkpoint(UUID, {"checkpoint_storage": storage}, 1, 1, {}, 1, "", "", {}, {}, state="COMPLETED",
                      storage=storage, _session=object())  # type: ignore[arg-type]


def test_ranks_downloading_to_one_path_each_read_complete_files(tmp_path: pathlib.Path,
                                                                 monkeypatch: Any) -> None:
    storage = stored_checkpoint(tmp_path)
    expected = hashlib.sha256((tmp_path / "storage" / UUID / "weights.bin").read_bytes()).hexdigest()
    for attempt in range(10):
        run_dir = tmp_path / f"run{attempt}"
        run_dir.mkdir()
        monkeypatch.chdir(run_dir)
        start = threading.Barrier(6)

        def rank(_: int) -> str:
            start.wait()
            path = pathlib.Path(checkpoint(storage).download())  # checkpoints/<uuid>, as every rank calls it
            return hashlib.sha256((path / "weights.bin").read_bytes()).hexdigest()

        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            assert list(pool.map(rank, range(6))) == [expected] * 6
        local = pathlib.Path("checkpoints", UUID)
        assert sorted(p.name for p in local.iterdir()) == ["code", "metadata.json", "weights.bin"]
        assert not [p for p in pathlib.Path("checkpoints").iterdir() if p.name != UUID], "no staging left behind"


def test_a_download_into_a_directory_of_other_files_keeps_them(tmp_path: pathlib.Path) -> None:
    storage = stored_checkpoint(tmp_path)
    target = tmp_path / "out"
    target.mkdir()
    (target / "notes.txt").write_text("mine")
    assert checkpoint(storage).download(str(target)) == str(target)
    assert sorted(p.name for p in target.iterdir()) == ["code", "metadata.json", "notes.txt", "weights.bin"]
    assert (target / "weights.bin").stat().st_size == 6 * 1024 * 1024
    empty = tmp_path / "empty"
    empty.mkdir()
    checkpoint(storage).download(str(empty))
    assert (empty / "metadata.json").is_file() and (empty / "code" / "model_def.py").is_file()
