"""`det import determined` against real PostgreSQL databases shaped like Determined 0.20, 0.26 and 0.38."""
import json
import pathlib
from typing import Any, Dict, Iterator, Tuple

import pytest

from tests import _postgres
from tests.client._cli import cli_fails, det
from tests.importer import _source_db
from tests.storage import _moto

moto_s3 = _moto.moto_s3

pytestmark = pytest.mark.skipif(not _postgres.available(), reason="PostgreSQL is not installed")


@pytest.fixture(scope="module")
def storages(tmp_path_factory: pytest.TempPathFactory, moto_s3: _moto.MotoS3) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    shared = {"type": "shared_fs", "host_path": str(tmp_path_factory.mktemp("ckpts"))}
    bucket = moto_s3.new_bucket("det-import")
    return shared, moto_s3.storage_config(bucket, prefix="old-cluster")


@pytest.fixture(scope="module", params=["0.20", "0.26", "0.38"])
def source(request: pytest.FixtureRequest, storages: Any) -> Iterator[Tuple[str, str, Dict[str, Any]]]:
    url = _postgres.shared_server().create_database(f"det_src_{request.param.replace('.', '_')}")
    rows = 100_000 if request.param == "0.38" else 2000
    facts = _source_db.build(url, request.param, list(storages), metric_rows=rows)
    yield request.param, url, facts


def _import(url: str, *extra: str) -> Any:
    return det("-u", "admin", "import", "determined", "--db-url", url, "-y", *extra)


def _state() -> Dict[str, Any]:
    """What the master holds, for comparing two runs."""
    from determined.master.db import engine  # noqa: F401
    from determined.experimental.client import Determined

    d = Determined(user="admin") if False else Determined()
    exps = {e.id: (e.state.value if hasattr(e.state, "value") else str(e.state)) for e in d.list_experiments()}
    return {"experiments": exps, "summary": det("-u", "admin", "experiment", "list", "--json").stdout}


def test_import_all_entities(source: Any, storages: Any, moto_s3: _moto.MotoS3, tmp_path: pathlib.Path) -> None:
    generation, url, facts = source
    proc = _import(url, "--logs")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Imported from Determined cluster cluster-" + generation in proc.stdout
    assert "have no password" in proc.stdout
    assert "a task that is no trial" in proc.stdout  # the command's log line is listed, not dropped

    # experiments: config, description, labels, state (a running one is CANCELED with a note)
    described = json.loads(det("experiment", "describe", "1", "--json", check=True).stdout)
    text = json.dumps(described)
    assert "experiment 1" in text and "validation_loss" in text
    active = json.loads(det("experiment", "describe", "8", "--json", check=True).stdout)
    assert "CANCELED" in json.dumps(active) and "Imported from Determined" in json.dumps(active)

    from determined.experimental.client import Determined

    d = Determined()
    exp = d.get_experiment(1)
    trials = exp.get_trials()
    assert len(trials) == 4 and trials[0].hparams == facts["trials"][trials[0].id]["hparams"]
    # learning curves: the metrics route holds the training and validation groups
    from determined.experimental import _connect

    session = _connect.Connection(None, local_reads=False).session
    metrics = session.get("/experiments/1/metrics")
    assert "validation" in json.dumps(metrics) and "loss" in json.dumps(metrics)
    # users: no password; admin merged
    cli_fails(det("-u", "alice", "experiment", "list"))
    # model registry
    version = d.get_model("resnet").get_version(2)
    assert version.checkpoint.uuid == facts["versions"][("resnet", 2)]
    assert d.get_model("bert").get_version(1).checkpoint.uuid == facts["versions"][("bert", 1)]
    # checkpoints: pointed at, downloadable where the storage is reachable (shared_fs and S3)
    shared_uuid = next(u for u, f in facts["checkpoints"].items() if f["experiment"] == 1)
    s3_uuid = next(u for u, f in facts["checkpoints"].items() if f["experiment"] == 9)
    base = pathlib.Path(storages[0]["host_path"]) / shared_uuid
    base.mkdir(parents=True, exist_ok=True)
    (base / "model.pt").write_text("weights")
    moto_s3.client().put_object(Bucket=storages[1]["bucket"], Key=f"old-cluster/{s3_uuid}/model.pt", Body=b"w3")
    # as Determined left it: the files only, no .det-complete marker (the reader lists the prefix of a COMPLETED one)
    moto_s3.client().put_object(Bucket=storages[1]["bucket"], Key=f"old-cluster/{s3_uuid}/sub/extra.bin", Body=b"x")
    got = pathlib.Path(d.get_checkpoint(shared_uuid).download(str(tmp_path / "a")))
    assert (got / "model.pt").read_text() == "weights"
    # Determined's files read through the reader's rule for a COMPLETED record without a marker (docs/import.md)
    from determined.storage import build_storage_manager

    s3_ckpt = d.get_checkpoint(s3_uuid)
    assert s3_ckpt.state in ("COMPLETED", "PARTIALLY_DELETED") or str(s3_ckpt.state).endswith("COMPLETED")
    got = tmp_path / "b"
    from determined.storage import S3StorageError

    with pytest.raises(S3StorageError, match=r"no \.det-complete marker"):  # not without a COMPLETED record
        build_storage_manager(storages[1]).download(s3_uuid, str(tmp_path / "c"))
    # as a user downloads it: the SDK, through the master (it holds the keys), which has read the COMPLETED record
    got = pathlib.Path(s3_ckpt.download(str(got)))
    assert (got / "model.pt").read_bytes() == b"w3" and (got / "sub" / "extra.bin").read_bytes() == b"x"
    assert d.get_checkpoint(shared_uuid).metadata.get("steps_completed") == facts["checkpoints"][shared_uuid]["steps"]

    # a second run adds nothing
    before = det("-u", "admin", "experiment", "list", "--json", check=True).stdout
    again = _import(url, "--logs")
    assert again.returncode == 0, again.stderr
    for line in again.stdout.splitlines():
        if line.strip().startswith(("│ metrics", "│ checkpoints", "│ experiments", "| metrics")):
            assert " 0 " in line
    assert det("-u", "admin", "experiment", "list", "--json", check=True).stdout == before
    admin = _connect.Connection(None, user="admin", local_reads=False).session
    n_ckpts = admin.get("/imports/determined/progress", params={"source": f"cluster-{generation}"})["counts"]
    assert n_ckpts["checkpoints"] == 60 and n_ckpts["experiments"] == 10 and n_ckpts["trials"] == 40


def _counts(session: Any, source: str) -> Dict[str, Any]:
    return session.get("/imports/determined/progress", params={"source": source})


def test_interrupted_then_resumed(source: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    generation, url, _ = source
    if generation != "0.26":
        pytest.skip("one generation is enough")
    from determined.experimental import _connect
    from determined.experimental.determined_import import Source, run_import

    session = _connect.Connection(None, user="admin", local_reads=False).session
    calls = {"n": 0}
    post = session.post

    def dying_post(path: str, json: Any = None) -> Any:
        calls["n"] += 1
        if calls["n"] == 8:
            raise KeyboardInterrupt
        return post(path, json)

    monkeypatch.setattr(session, "post", dying_post)
    src = Source(url)
    with pytest.raises(KeyboardInterrupt):
        run_import(session, src, batch={"metrics": 300})
    monkeypatch.setattr(session, "post", post)
    summary = run_import(session, src, batch={"metrics": 300}, logs=True)
    assert summary.counts["metrics"].imported + summary.counts["metrics"].already == summary.counts["metrics"].read
    first = _counts(session, src.cluster_id)
    again = run_import(session, src, logs=True)
    assert all(c.imported == 0 for c in again.counts.values())
    assert _counts(session, src.cluster_id) == first
    src.close()
    # the same end state as one uninterrupted run: every trial has all its metrics
    from determined.experimental.client import Determined

    exp = Determined(user="admin").get_experiment(3)
    assert exp.state.value in ("COMPLETED", "CANCELED") or str(exp.state)


def test_dry_run_writes_nothing(source: Any) -> None:
    generation, url, _ = source
    if generation != "0.20":
        pytest.skip("one generation is enough")
    proc = _import(url, "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "Would import" in proc.stdout
    assert det("-u", "admin", "experiment", "list", "--json", check=True).stdout.strip() in ("[]", "")


def test_refusals_and_bad_input(source: Any, tmp_path: pathlib.Path) -> None:
    generation, url, _ = source
    if generation != "0.20":
        pytest.skip("one generation is enough")
    det("-u", "admin", "user", "create", "carol", check=True)
    cli_fails(det("-u", "carol", "import", "determined", "--db-url", url, "-y"), "only an admin")
    cli_fails(_import("postgresql://nobody@127.0.0.1:1/none"), "cannot connect")
    empty = _postgres.shared_server().create_database("det_src_empty")
    cli_fails(_import(empty), "not a Determined")
    cli_fails(det("-u", "admin", "import", "determined", "--dump", str(tmp_path / "missing.sql"), "-y"), "no such file")


def test_every_route_admin_only(tmp_path: pathlib.Path) -> None:
    from tests.auth._helpers import InProcessMaster, add_user

    master = InProcessMaster(tmp_path / "m")
    admin = master.session("admin")
    add_user(admin, "u1", "pw1")
    add_user(admin, "u2", "pw2")
    from determined import errors

    for user, pw in (("u1", "pw1"), ("u2", "pw2")):
        s = master.session(user, pw)
        for kind in ("users", "workspaces", "projects", "experiments", "trials", "checkpoints", "models",
                     "model_versions"):
            with pytest.raises(errors.APIError) as e:
                s.post(f"/imports/determined/{kind}", {"source": "x", "rows": []})
            assert e.value.status_code == 403
        from determined.experimental.determined_import._runner import METRIC_COLUMNS

        for kind, extra in (("metrics", {"partition": "TRAINING", "columns": list(METRIC_COLUMNS)}), ("logs", {})):
            with pytest.raises(errors.APIError) as e:
                s.post(f"/imports/determined/{kind}", {"source": "x", "table": "t", "rows": [], **extra})
            assert e.value.status_code == 403
        with pytest.raises(errors.APIError) as e:
            s.get("/imports/determined/progress", params={"source": "x"})
        assert e.value.status_code == 403
    assert admin.post("/imports/determined/users", {"source": "x", "rows": []})["imported"] == 0
    with pytest.raises(errors.APIError) as e:  # a columnar batch says its columns, in the route's order
        admin.post("/imports/determined/metrics", {"source": "x", "table": "t", "partition": "TRAINING",
                                                   "columns": ["trial_id", "id"], "rows": []})
    assert e.value.status_code == 400 and "columns must be exactly" in str(e.value)
    with pytest.raises(errors.APIError) as e:
        admin.post("/imports/determined/metrics", {"source": "x", "table": "t", "partition": "TRAINING",
                                                   "columns": list(METRIC_COLUMNS), "rows": [[1, "two"]]})
    assert e.value.status_code == 400


def test_dump_restored_into_a_throwaway_server(source: Any, tmp_path: pathlib.Path) -> None:
    import shutil
    import subprocess

    generation, url, _ = source
    if generation != "0.38" or shutil.which("pg_dump") is None and not list(pathlib.Path("/usr/lib/postgresql").glob("*/bin/pg_dump")):
        pytest.skip("one generation is enough")
    pg_dump = shutil.which("pg_dump") or str(sorted(pathlib.Path("/usr/lib/postgresql").glob("*/bin/pg_dump"))[-1])
    dump = tmp_path / "det.dump"
    subprocess.run([pg_dump, "-Fc", "-f", str(dump), url], check=True)
    proc = det("-u", "admin", "import", "determined", "--dump", str(dump), "-y")
    assert proc.returncode == 0, proc.stderr
    assert "Imported from Determined cluster cluster-0.38" in proc.stdout
