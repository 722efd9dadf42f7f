"""Checkpoint I/O: what the platform's checkpoint path costs over plain `torch.save` and a file copy.

A torch state dict of `--size-mb` MB (four float32 tensors) is saved and restored, several times, two ways,
in the same run:

* save + upload
  - baseline: ``torch.save`` into a temporary directory, then ``shutil.copy`` of the file into the store;
  - ours: ``core.init(checkpoint_dir=store).checkpoint.store_path()`` (the local core context, shared_fs
    storage: temporary directory, copy into a staging directory with fsync, rename into place);
* download + restore
  - baseline: ``shutil.copy`` of the stored file to a temporary directory, then ``torch.load``;
  - ours: ``checkpoint.restore_path(uuid)`` then ``torch.load``.

With ``--s3`` the same runs against a moto S3 server started for the run (boto3 ``upload_file`` /
``download_file`` as the baseline, ``S3StorageManager`` as ours): figures to report, not a goal.

Between repetitions the page cache is flushed to disk (``os.sync``, untimed) so that every repetition starts
from the same state; the order of baseline and ours alternates. The table shows medians and the ratio
ours / baseline (goal for shared_fs: <= 1.10).

Run: ``.venv/bin/python benchmarks/checkpoint_io.py [--size-mb 1024] [--repeats 5] [--s3] [--dir /tmp]``.
"""
import abc
import argparse
import contextlib
import os
import pathlib
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import torch

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from determined import core, storage  # noqa: E402

FILE = "model.pt"
Timing = Dict[str, List[float]]


def make_state_dict(size_mb: int) -> Dict[str, torch.Tensor]:
    """Four float32 tensors holding `size_mb` MB together."""
    per_tensor = max(1, size_mb * 1024 * 1024 // 4 // 4)
    gen = torch.Generator().manual_seed(0)
    return {f"layer{i}.weight": torch.rand(per_tensor, generator=gen) for i in range(4)}


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


class Backend(abc.ABC):
    """One place to store checkpoints: the baseline and our way of saving into it and restoring from it."""

    name = ""
    checkpoint: core.CheckpointContext

    @abc.abstractmethod
    def baseline_save(self, state: Dict[str, torch.Tensor], scratch: pathlib.Path) -> str:
        """Save `state` the plain way (using `scratch` as a temporary directory); returns an id to restore."""

    @abc.abstractmethod
    def baseline_restore(self, ckpt_id: str, scratch: pathlib.Path) -> Dict[str, torch.Tensor]:
        """Restore what `baseline_save` stored under `ckpt_id`, the plain way."""

    def ours_save(self, state: Dict[str, torch.Tensor]) -> str:
        with self.checkpoint.store_path({"steps_completed": 0}) as (path, storage_id):
            torch.save(state, path / FILE)
        return storage_id

    def ours_restore(self, storage_id: str) -> Dict[str, torch.Tensor]:
        with self.checkpoint.restore_path(storage_id) as path:
            return torch.load(path / FILE)

    def remove(self, ckpt_id: str) -> None:
        self.checkpoint.storage_manager.delete(ckpt_id)


class SharedFS(Backend):
    name = "shared_fs"

    def __init__(self, store: pathlib.Path) -> None:
        self.store = store
        self.context = core.init(checkpoint_dir=str(store))
        self.checkpoint = self.context.checkpoint

    def baseline_save(self, state: Dict[str, torch.Tensor], scratch: pathlib.Path) -> str:
        ckpt_id = f"plain-{uuid.uuid4().hex[:8]}"
        torch.save(state, scratch / FILE)
        (self.store / ckpt_id).mkdir(parents=True)
        shutil.copy(scratch / FILE, self.store / ckpt_id / FILE)
        return ckpt_id

    def baseline_restore(self, ckpt_id: str, scratch: pathlib.Path) -> Dict[str, torch.Tensor]:
        shutil.copy(self.store / ckpt_id / FILE, scratch / FILE)
        return torch.load(scratch / FILE)

    def remove(self, ckpt_id: str) -> None:
        shutil.rmtree(self.store / ckpt_id, ignore_errors=True)


class S3(Backend):
    name = "s3 (moto)"

    def __init__(self, endpoint: str, access_key: str, secret_key: str) -> None:
        import boto3

        self.client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                                   aws_access_key_id=access_key, aws_secret_access_key=secret_key)
        self.bucket = f"bench-{uuid.uuid4().hex[:8]}"
        self.client.create_bucket(Bucket=self.bucket)
        manager = storage.S3StorageManager(self.bucket, access_key, secret_key, endpoint_url=endpoint)
        self.checkpoint = core.CheckpointContext(manager, None, 0, core.DistributedContext())

    def baseline_save(self, state: Dict[str, torch.Tensor], scratch: pathlib.Path) -> str:
        ckpt_id = f"plain-{uuid.uuid4().hex[:8]}"
        torch.save(state, scratch / FILE)
        self.client.upload_file(str(scratch / FILE), self.bucket, f"{ckpt_id}/{FILE}")
        return ckpt_id

    def baseline_restore(self, ckpt_id: str, scratch: pathlib.Path) -> Dict[str, torch.Tensor]:
        self.client.download_file(self.bucket, f"{ckpt_id}/{FILE}", str(scratch / FILE))
        return torch.load(scratch / FILE)

    def remove(self, ckpt_id: str) -> None:
        if ckpt_id.startswith("plain-"):
            self.client.delete_object(Bucket=self.bucket, Key=f"{ckpt_id}/{FILE}")
        else:
            super().remove(ckpt_id)


@contextlib.contextmanager
def scratch_dir(base: pathlib.Path) -> Iterator[pathlib.Path]:
    path = pathlib.Path(tempfile.mkdtemp(prefix="bench-scratch-", dir=base))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def check_same(a: Dict[str, torch.Tensor], b: Dict[str, torch.Tensor]) -> None:
    if a.keys() != b.keys() or any(not torch.equal(a[k], b[k]) for k in a):
        raise SystemExit("restored state dict differs from the saved one")


def run_backend(backend: Backend, state: Dict[str, torch.Tensor], repeats: int, base: pathlib.Path) -> Timing:
    times: Timing = {"save baseline": [], "save ours": [], "restore baseline": [], "restore ours": []}
    for rep in range(repeats + 1):  # the first repetition warms up and is not counted
        record = rep > 0
        order = ("baseline", "ours") if rep % 2 == 0 else ("ours", "baseline")
        for who in order:
            os.sync()
            with scratch_dir(base) as scratch:
                holder: Dict[str, Any] = {}
                if who == "baseline":
                    t_save = timed(lambda: holder.update(id=backend.baseline_save(state, scratch)))
                else:
                    t_save = timed(lambda: holder.update(id=backend.ours_save(state)))
            os.sync()
            with scratch_dir(base) as scratch:
                if who == "baseline":
                    t_load = timed(lambda: holder.update(state=backend.baseline_restore(holder["id"], scratch)))
                else:
                    t_load = timed(lambda: holder.update(state=backend.ours_restore(holder["id"])))
            check_same(state, holder.pop("state"))
            backend.remove(holder["id"])
            if record:
                times[f"save {who}"].append(t_save)
                times[f"restore {who}"].append(t_load)
        print(f"  {backend.name}: repetition {rep}{' (warm-up)' if not record else ''} done", flush=True)
    return times


def report(name: str, times: Timing, size_mb: int) -> List[Tuple[str, float]]:
    ratios = []
    print(f"\n{name}, {size_mb} MB, median of {len(times['save ours'])} (min in brackets):")
    print(f"{'operation':<20} {'baseline s':>16} {'ours s':>16} {'ours/baseline':>14} {'ours MB/s':>10}")
    for op in ("save", "restore"):
        base, ours = times[f"{op} baseline"], times[f"{op} ours"]
        mb, mo = statistics.median(base), statistics.median(ours)
        ratio = mo / mb
        ratios.append((op, ratio))
        print(f"{op + (' + upload' if op == 'save' else ' + download'):<20} {mb:>9.3f} ({min(base):.3f}) "
              f"{mo:>9.3f} ({min(ours):.3f}) {ratio:>14.3f} {size_mb / mo:>10.0f}")
    return ratios


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mb", type=int, default=1024, help="size of the state dict (default 1024)")
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions (default 5, plus a warm-up)")
    parser.add_argument("--s3", action="store_true", help="also run against a moto S3 server (reported, no goal)")
    parser.add_argument("--dir", default=tempfile.gettempdir(), help="where to write (default: the temp dir)")
    args = parser.parse_args(argv)
    if args.size_mb < 1 or args.repeats < 1:
        parser.error("--size-mb and --repeats must be at least 1")
    base = pathlib.Path(args.dir)
    free_mb = shutil.disk_usage(base).free // 2**20
    if free_mb < 4 * args.size_mb:
        parser.error(f"{base} has {free_mb} MB free; the run needs about {4 * args.size_mb} MB (use --dir or a smaller --size-mb)")
    # Temporary checkpoint directories of the core context go to the same place (tempfile honours TMPDIR).
    os.environ["TMPDIR"] = str(base)
    tempfile.tempdir = None
    torch.set_num_threads(1)

    state = make_state_dict(args.size_mb)
    print(f"state dict: {sum(t.numel() * 4 for t in state.values()) / 2**20:.0f} MB in {len(state)} tensors; "
          f"writing under {base}", flush=True)
    goal_ok = True
    with tempfile.TemporaryDirectory(prefix="bench-store-", dir=base) as store:
        shared = SharedFS(pathlib.Path(store))
        for op, ratio in report("shared_fs", run_backend(shared, state, args.repeats, base), args.size_mb):
            goal_ok &= ratio <= 1.10
    if args.s3:
        from tests.storage._moto import start_moto_server, stop_moto_server

        server, proc = start_moto_server()
        try:
            s3 = S3(server.endpoint_url, server.access_key, server.secret_key)
            report("s3 on a local moto server", run_backend(s3, state, args.repeats, base), args.size_mb)
        finally:
            stop_moto_server(proc)
    print(f"\nshared_fs goal (ours/baseline <= 1.10 for save and restore): {'met' if goal_ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
