"""What `det` prints for people: tables that fit 80 columns without cutting numbers, control characters of
other users' text escaped, "did you mean", hints on empty lists, experiments that nothing runs flagged, and
read commands that import nothing of the server stack."""
import json
import os
import re
import pathlib
import subprocess
import sys
from typing import Any, Dict, Iterator

import pytest

from determined.master import embedded
from tests.client._cli import cli_fails, det
from tests.master._helpers import model_def

EVIL = "evil\x1b[2J\x1b[31mred\x07\rback\u202eflip"


def make_data(data_dir: pathlib.Path) -> Dict[str, Any]:
    """Two experiments written through the master's API: a random search whose trials reported, with long-named
    hyperparameters and tiny numbers, and one with control characters in its description and logs."""
    session = embedded.in_process_session(data_dir)
    master = session._client.app.state.master
    config = {"entrypoint": "model:T", "description": "small numbers", "max_restarts": 0,
              "searcher": {"name": "random", "metric": "validation_loss", "max_length": {"batches": 10}, "max_trials": 3},
              "hyperparameters": {"global_batch_size": 8,
                                  "learning_rate_of_the_optimizer": {"type": "log", "minval": -6, "maxval": -5},
                                  "dropout_probability_first_layer": {"type": "double", "minval": 0.1, "maxval": 0.5},
                                  "a_third_searched_hyperparameter": {"type": "int", "minval": 1, "maxval": 100}}}
    exp = session.post("/experiments", {"config": config, "model_definition": model_def()})["experiment"]["id"]
    for i, trial in enumerate(session.get(f"/experiments/{exp}")["trials"]):
        tid = trial["id"]
        session.post(f"/trials/{tid}/training_metrics", {"steps_completed": 10, "metrics": {"loss": 0.5}})
        session.post(f"/trials/{tid}/validation_metrics",
                     {"steps_completed": 10, "metrics": {"validation_loss": 0.000012345678 * (i + 1)}})
        session.post(f"/trials/{tid}/searcher/completed_operation", {"length": 10, "metric": 0.000012345678 * (i + 1)})
    evil = session.post("/experiments", {"config": {**config, "description": EVIL},
                                         "model_definition": model_def()})["experiment"]["id"]
    evil_trial = session.get(f"/experiments/{evil}")["trials"][0]["id"]
    from determined.master.db import TrialLog, utcnow

    with master.write() as s:
        s.add(TrialLog(trial_id=evil_trial, timestamp=utcnow(), stream="stdout", message=EVIL))
    master.stop()
    return {"small": exp, "evil": evil, "evil_trial": evil_trial}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    data_dir = tmp_path_factory.mktemp("cli-output") / "data"
    ids = make_data(data_dir)
    yield {**ids, "data_dir": data_dir}


@pytest.fixture
def columns(monkeypatch: pytest.MonkeyPatch, data: Dict[str, Any]) -> None:
    monkeypatch.setenv("DET_DATA_DIR", str(data["data_dir"]))
    monkeypatch.setenv("COLUMNS", "80")


def test_tables_fit_80_columns_dropping_hyperparameters_before_cutting_numbers(data: Dict[str, Any], columns: None) -> None:
    out = det("experiment", "describe", str(data["small"]), check=True).stdout
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), out
    assert "0.000012346" not in out and "1.2346e-05" in out and "2.4691e-05" in out and "3.7037e-05" in out
    assert not re.search(r"[\d.]…", out)  # text may be shortened, numbers never
    trials_note = " ".join(out[out.index("Trials\n"):].split())  # the note under the trials table, unwrapped
    assert ("(not shown to fit 80 columns: a_third_searched_hyperparameter, dropout_probability_first_layer, "
            "learning_rate_of_the_optimizer; widen the terminal or use --json)") in trials_note
    listed = det("experiment", "list", check=True).stdout
    assert all(len(line) <= 80 for line in listed.splitlines()) and "small numbers" in listed


def test_control_characters_of_user_text_are_escaped(data: Dict[str, Any], columns: None) -> None:
    for argv in (["experiment", "list"], ["experiment", "list", "--csv"], ["experiment", "describe", str(data["evil"])],
                 ["trial", "logs", str(data["evil_trial"])], ["trial", "describe", str(data["evil_trial"])]):
        out = det(*argv, check=True).stdout
        assert not any(ch in out for ch in "\x1b\x07\r\u202e"), (argv, out)
    assert "evil\\x1b[2J\\x1b[31mred\\x07\\rback\\u202eflip" in det("trial", "logs", str(data["evil_trial"])).stdout
    # such a description is not a valid name: the experiment gets a pet name (not the description), and the
    # description is kept exactly as it was given
    assert "evil" not in det("experiment", "list").stdout
    # JSON escapes them its own way, and stays exact
    listed = json.loads(det("experiment", "list", "--json", check=True).stdout)
    assert [e["description"] for e in listed if e["id"] == data["evil"]] == [EVIL]


def test_did_you_mean(data: Dict[str, Any], columns: None, tmp_path: pathlib.Path) -> None:
    cli_fails(det("experimnet", "list"), "invalid choice: 'experimnet' (did you mean 'experiment'?)")
    cli_fails(det("experiment", "lst"), "(did you mean 'list'?)")
    cli_fails(det("model", "list", "--sort-by", "nam"), "(did you mean 'name'?)")
    config = tmp_path / "asha.yaml"
    config.write_text("entrypoint: model:T\nhyperparameters: {global_batch_size: 1}\n"
                      "searcher: {name: asha, metric: loss, max_length: {batches: 10}, max_trials: 4}\n")
    cli_fails(det("preview-search", str(config)), "searcher.name", "did you mean 'adaptive_asha'?")


def test_hints_on_empty_lists_and_one_trial(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DET_DATA_DIR", str(tmp_path / "empty"))
    assert "No experiments yet. Create one with: det experiment create" in det("experiment", "list", check=True).stdout
    assert "No models in the registry yet. Add one with: det model create NAME" in det("model", "list", check=True).stdout
    assert "No TensorBoard runs" in det("tensorboard", "list", "--local", check=True).stdout
    config = tmp_path / "single.yaml"
    config.write_text("entrypoint: model:T\nhyperparameters: {global_batch_size: 1}\n"
                      "searcher: {name: single, metric: loss, max_length: {batches: 10}}\n")
    out = det("preview-search", str(config), check=True).stdout
    assert "max_length 10 batches, 1 trial\n" in out


def test_list_checkpoints_best_help_matches_the_readme() -> None:
    out = " ".join(det("experiment", "lc", "--help").stdout.split())
    assert "only the N best checkpoints by the searcher metric, best first (validated checkpoints only" in out
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "its N best checkpoints by the searcher metric, best first (validated checkpoints only" in readme


def test_experiments_nothing_runs_are_flagged_with_the_command_that_resumes_them(data: Dict[str, Any],
                                                                                 columns: None) -> None:
    out = det("experiment", "list", check=True).stdout
    assert f"{data['small']}  ACTIVE!" in out
    note = " ".join(out[out.index("! no master runs"):].split())
    assert note == (f"! no master runs experiments {data['small']}, {data['evil']} (the command that ran them ended); "
                    f"resume with: det experiment activate {data['small']}")


@pytest.mark.skipif(os.environ.get("DET_TEST_DB") == "postgres",
                    reason="a data dir whose database is PostgreSQL is read through the master's app")
def test_read_commands_import_no_server_stack(data: Dict[str, Any]) -> None:
    """`det --help` and the read commands on a data dir no master runs on: no FastAPI, SQLAlchemy, httpx or rich."""
    probe = ("import sys, io, contextlib\nfrom determined.cli.main import main\n"
             "with contextlib.redirect_stdout(io.StringIO()):\n"
             "    try:\n        main(sys.argv[1:])\n    except SystemExit:\n        pass\n"
             "print(sorted(m for m in ('fastapi', 'sqlalchemy', 'httpx', 'rich', 'alembic', 'starlette', 'pydantic',"
             " 'yaml') if m in sys.modules))")
    env = {**os.environ, "DET_DATA_DIR": str(data["data_dir"])}
    env.pop("DET_MASTER", None)
    env.pop("DET_DB_URL", None)
    trial = data["evil_trial"]
    for argv in (["--help"], ["experiment", "list"], ["experiment", "describe", str(data["small"])],
                 ["trial", "describe", str(trial)], ["trial", "logs", str(trial)], ["model", "list"]):
        proc = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True, env=env,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().splitlines()[-1] == "[]", (argv, proc.stdout)
