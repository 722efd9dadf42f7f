"""A script written the way a Determined 0.38 user writes one, run unchanged as its own process against a
`det master up` (SQLite, or PostgreSQL in the PostgreSQL stage): login, a workspace and project, an experiment
that really trains there, wait, list, the top checkpoint downloaded, metrics streamed, the model registry; then
`det experiment logs` shows the trial's output."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from tests.client._cli import det

from ._server import ServerProcess, server_db_url

pytestmark = pytest.mark.slow

TRAIN = '''
import determined as det

with det.core.init() as core:
    info = det.get_cluster_info()
    lr = info.trial.hparams["lr"]
    print(f"user script trial: lr={lr}", flush=True)
    loss = 1.0
    for step in range(1, 5):
        loss *= 1 - lr
        core.train.report_training_metrics(steps_completed=step, metrics={"loss": loss})
    core.train.report_validation_metrics(steps_completed=4, metrics={"loss": loss})
    with core.checkpoint.store_path({"steps_completed": 4}) as (path, uuid):
        (path / "weights.txt").write_text(f"lr={lr} loss={loss}")
'''

CONFIG = '''
name: user-script
entrypoint: python3 train.py
hyperparameters:
  lr:
    type: categorical
    vals: [0.1, 0.5]
searcher:
  name: grid
  metric: loss
  smaller_is_better: true
  max_length:
    batches: 4
max_restarts: 0
'''

# Only what a 0.38 user writes: DET_MASTER comes from the environment, nothing of this project is imported.
USER_SCRIPT = '''
import json
import os
import sys

from determined.experimental import client

client.login()  # $DET_MASTER, user determined
workspace = client.create_workspace("research")
project = workspace.create_project("grid", description="lr grid")
exp = client.create_experiment(sys.argv[1], sys.argv[2], project_id=project.id)
state = exp.wait(interval=0.5)
listed = [e.id for e in client.list_experiments(project_id=project.id)]
trials = exp.list_trials()
best = exp.top_checkpoint()
path = best.download(os.path.join(sys.argv[3], "best"))
losses = {}
for m in client.stream_trials_metrics([t.id for t in trials], "training"):
    losses.setdefault(m.trial_id, []).append(round(m.metrics["loss"], 6))
model = client.create_model("user-script-model", description="best of the grid", workspace_name="research")
version = model.register_version(best.uuid)
version.set_notes("lr grid winner")
latest = client.get_model("user-script-model").get_version(-1)
print(json.dumps({
    "state": str(state.value), "experiment": exp.id, "listed": listed, "project": exp.project_id,
    "trials": len(trials), "best_hparams": best.training.hparams, "files": sorted(os.listdir(path)),
    "weights": open(os.path.join(path, "weights.txt")).read(), "losses": losses,
    "version": version.model_version, "latest_uuid": latest.checkpoint.uuid, "best_uuid": best.uuid,
    "notes": latest.notes, "model_workspace": model.workspace_id, "workspace": workspace.id,
    "whoami": client.whoami().username,
}))
'''


def test_a_0_38_user_script_runs_unchanged_against_det_master_up(tmp_path: pathlib.Path) -> None:
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "train.py").write_text(TRAIN)
    config = tmp_path / "grid.yaml"
    config.write_text(CONFIG)
    script = tmp_path / "user_script.py"
    script.write_text(USER_SCRIPT)
    server = ServerProcess(tmp_path / "det-data", db=server_db_url(), fake=False).start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
        env["DET_MASTER"] = server.url
        proc = subprocess.run([sys.executable, str(script), str(config), str(model_dir), str(tmp_path)], env=env,
                              cwd=tmp_path, capture_output=True, text=True, timeout=240)
        assert proc.returncode == 0, proc.stdout + proc.stderr + server.output()[-3000:]
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        assert (out["state"], out["trials"], out["whoami"]) == ("COMPLETED", 2, "determined")
        assert out["listed"] == [out["experiment"]] and out["project"] != 1
        assert out["best_hparams"] == {"lr": 0.5}, "the larger step size reaches the smaller loss"
        assert out["weights"] == "lr=0.5 loss=0.0625" and "weights.txt" in out["files"]
        assert sorted(out["losses"].values()) == [[0.5, 0.25, 0.125, 0.0625], [0.9, 0.81, 0.729, 0.6561]]
        assert (out["version"], out["latest_uuid"], out["notes"]) == (1, out["best_uuid"], "lr grid winner")
        assert out["model_workspace"] == out["workspace"]

        logs = det("-m", server.url, "experiment", "logs", str(out["experiment"]), check=True).stdout
        assert "user script trial: lr=" in logs
    finally:
        server.stop()
