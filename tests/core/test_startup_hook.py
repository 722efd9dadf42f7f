"""What the harness does before the trial: environment.environment_variables and the model dir's startup-hook.sh."""
import base64
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from typing import Any, Dict, Iterator, List

import pytest

from determined.config import load_experiment_config
from tests.core._fake_master import TOKEN, FakeMaster
from tests.core._probe_trial import MODEL_DEF

PROBE_PACKAGE = "det_startup_hook_probe"



def _wheel(directory: pathlib.Path) -> pathlib.Path:
    """A tiny pure-Python wheel, built by hand (no network, no build backend)."""
    path = directory / f"{PROBE_PACKAGE}-1.0-py3-none-any.whl"
    info = f"{PROBE_PACKAGE}-1.0.dist-info"
    files = {
        f"{PROBE_PACKAGE}/__init__.py": 'VALUE = "installed by the startup hook"\n',
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: det-startup-hook-probe\nVersion: 1.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


@pytest.fixture
def model_dir(tmp_path: pathlib.Path) -> pathlib.Path:
    root = tmp_path / "model"
    (root / "extra").mkdir(parents=True)
    (root / "model_def.py").write_text(MODEL_DEF)
    (root / "extra" / "extra_module.py").write_text('VALUE = "on the PYTHONPATH the hook exported"\n')
    return root


@pytest.fixture
def masters() -> Iterator[List[FakeMaster]]:
    started: List[FakeMaster] = []
    yield started
    for m in started:
        m.stop()


def _run(masters: List[FakeMaster], model_dir: pathlib.Path, tmp_path: pathlib.Path, env_config: Any,
         extra_env: Dict[str, str]) -> "tuple[subprocess.CompletedProcess, FakeMaster]":
    config = load_experiment_config({
        "entrypoint": "model_def:ProbeTrial",
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
        "checkpoint_storage": {"type": "shared_fs", "host_path": str(tmp_path), "storage_path": "ckpts"},
        "environment": {"environment_variables": env_config},
    })
    master = FakeMaster(config=config, hparams={"optim": {"lr": 1e-4, "momentum": 0.9}}, model_dir=model_dir).start()
    masters.append(master)
    master.ops = [{"length": 1}]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHASHSEED", "MY_VAR", "HOOK_VAR")}
    env.update({"DET_MASTER": master.url, "DET_TRIAL_ID": "3", "DET_EXPERIMENT_ID": "5",
                "DET_ALLOCATION_ID": f"alloc-{tmp_path.name}", "DET_SESSION_TOKEN": TOKEN, "PYTHONUNBUFFERED": "1",
                "PATH": "/usr/bin:/bin"})  # the trial's interpreter is not on PATH: the hook must still reach its pip
    env.update(extra_env)
    cwd = tmp_path / "cwd"
    cwd.mkdir(exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "determined.exec.harness"], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=120)
    return proc, master


def _probe(proc: subprocess.CompletedProcess) -> Dict[str, Any]:
    lines = [line for line in proc.stdout.splitlines() if line.startswith("PROBE ")]
    assert len(lines) == 1, proc.stdout + proc.stderr
    return dict(json.loads(lines[0][len("PROBE "):]))


def test_hook_output_exports_and_pip_install_reach_the_trial(masters: List[FakeMaster], model_dir: pathlib.Path,
                                                             tmp_path: pathlib.Path) -> None:
    wheel = _wheel(tmp_path)
    (model_dir / "startup-hook.sh").write_text(
        'echo "hook runs in $(basename "$PWD") with MY_VAR=$MY_VAR"\n'
        'export HOOK_VAR=from-the-hook\n'
        'export PYTHONPATH="$PYTHONPATH:$PWD/extra"\n'
        'pip install --no-index --no-deps --quiet --disable-pip-version-check "$WHEEL"\n'
    )
    try:
        proc, master = _run(masters, model_dir, tmp_path, ["MY_VAR=from-the-config", f"WHEEL={wheel}"], {})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        report = _probe(proc)
    finally:  # uninstall: remove what the wheel installed into this interpreter's site-packages
        purelib = pathlib.Path(sysconfig.get_paths()["purelib"])
        for installed in (purelib / PROBE_PACKAGE, purelib / f"{PROBE_PACKAGE}-1.0.dist-info"):
            shutil.rmtree(installed, ignore_errors=True)
    assert "hook runs in trial-3-" in proc.stdout and "with MY_VAR=from-the-config" in proc.stdout
    assert "+ export HOOK_VAR=from-the-hook" in proc.stderr  # each command echoed, as Determined's set -x
    assert "running startup-hook.sh" in proc.stdout and "startup-hook.sh finished in" in proc.stdout
    assert report["probe"] == "installed by the startup hook"
    assert report["extra"] == "on the PYTHONPATH the hook exported"
    assert report["env"]["HOOK_VAR"] == "from-the-hook" and report["env"]["MY_VAR"] == "from-the-config"
    assert report["optim"] == {"lr": 0.0001, "momentum": 0.9}  # nested hyperparameters arrive nested
    assert master.completed == [{"length": 1, "metric": 0.0001}]


def test_a_failing_hook_fails_the_run_naming_the_hook_and_its_status(masters: List[FakeMaster],
                                                                     model_dir: pathlib.Path,
                                                                     tmp_path: pathlib.Path) -> None:
    (model_dir / "startup-hook.sh").write_text("echo before\nsh -c 'exit 7'\necho after\n")
    proc, master = _run(masters, model_dir, tmp_path, [], {})
    assert proc.returncode == 1
    assert "before" in proc.stdout and "after" not in proc.stdout
    assert "startup-hook.sh failed with exit status 7" in proc.stdout
    assert "PROBE" not in proc.stdout and "Traceback" not in proc.stderr
    assert master.completed == [] and master.validation == []


def test_per_device_variables_python_variables_and_platform_variables(masters: List[FakeMaster],
                                                                      model_dir: pathlib.Path,
                                                                      tmp_path: pathlib.Path) -> None:
    variables = {"cpu": ["MY_VAR=on-cpu", "PYTHONHASHSEED=0", "DET_MASTER=http://elsewhere:1"],
                 "cuda": ["MY_VAR=on-gpu"]}
    proc, master = _run(masters, model_dir, tmp_path, variables, {"CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = _probe(proc)
    assert report["env"]["MY_VAR"] == "on-cpu"  # the list of the trial's kind of slot
    assert report["env"]["PYTHONHASHSEED"] == "0" and report["hash_randomization"] == 0  # the process restarted
    assert "restarting the trial's process so that PYTHONHASHSEED take effect" in proc.stdout
    assert report["env"]["DET_MASTER"] == master.url  # the platform's own variables keep its value
    assert "DET_MASTER is set by the platform for each trial" in proc.stdout
    assert master.context_requests == 2 and master.completed == [{"length": 1, "metric": 0.0001}]


def test_local_ranks_run_the_hook_once_and_all_take_its_exports(tmp_path: pathlib.Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "startup-hook.sh").write_text(f"echo ran >> {tmp_path / 'runs.txt'}\nsleep 0.3\nexport FROM_HOOK=shared\n")
    code = ("import os, sys; from determined.exec._startup_hook import run_startup_hook; "
            "ran = run_startup_hook(sys.argv[1]); print('RESULT', ran, os.environ.get('FROM_HOOK'), flush=True)")
    procs = []
    for rank in (1, 0):  # the waiting rank starts first
        env = {**os.environ, "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2", "DET_ALLOCATION_ID": f"a-{tmp_path.name}"}
        procs.append(subprocess.Popen([sys.executable, "-c", code, str(work)], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    outputs = [p.communicate(timeout=60)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert "RESULT False shared" in outputs[0] and "RESULT True shared" in outputs[1]
    assert (tmp_path / "runs.txt").read_text() == "ran\n"  # once for the two local ranks
    from determined.exec._startup_hook import forget_status

    monkeypatch.setenv("DET_ALLOCATION_ID", f"a-{tmp_path.name}")
    forget_status()  # what rank 0's harness does at the end of the run


def test_the_list_of_the_trials_kind_of_slot_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    from determined.exec import _environment

    config = load_experiment_config({
        "entrypoint": "m:T", "searcher": {"name": "single", "metric": "m", "max_length": 1},
        "environment": {"environment_variables": {"cpu": ["K=cpu"], "gpu": ["K=gpu", "NCCL_DEBUG=INFO"]}},
    })
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1")
    assert _environment.trial_device() == "cuda"
    assert _environment.wanted_changes(config, {}) == {"K": "gpu", "NCCL_DEBUG": "INFO"}  # `gpu`: 0.13's `cuda`
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert _environment.wanted_changes(config, {"K": "cpu"}) == {}  # already set as wanted


def _fake_wheel(directory: pathlib.Path, name: str, version: str) -> pathlib.Path:
    """A wheel of an empty package ``name`` at ``version`` (only ever resolved with --dry-run here)."""
    info = f"{name}-{version}.dist-info"
    files = {f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
             f"{info}/RECORD": ""}
    path = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for member, text in files.items():
            zf.writestr(member, text)
    return path


def test_pip_in_the_hook_may_not_replace_a_package_the_platform_runs_on(tmp_path: pathlib.Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Trials share the platform's environment: a hook's `pip install pandas` once pulled NumPy 2 under TF 2.15."""
    import importlib.metadata

    from determined.exec import _pip_guard
    from determined.exec._startup_hook import StartupHookError, run_startup_hook

    pins = _pip_guard.platform_pins()
    for name in ("numpy", "pydantic", "sqlalchemy", "mdurl"):  # direct and transitive requirements
        assert pins[name] == importlib.metadata.version(name)
    assert "torch" not in pins and "tensorflow-cpu" not in pins  # frameworks of the extras are the user's call

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _fake_wheel(wheels, "mdurl", "99.0")
    _fake_wheel(wheels, "det_free_probe", "1.0")
    work = tmp_path / "work"
    work.mkdir()
    pip = f'pip install --dry-run --no-index --find-links "{wheels}" --disable-pip-version-check'
    user_constraints = tmp_path / "user-constraints.txt"
    user_constraints.write_text("")
    monkeypatch.setenv("PIP_CONSTRAINT", str(user_constraints))
    monkeypatch.setenv("DET_ALLOCATION_ID", f"pins-{tmp_path.name}")
    # a package the platform does not use installs; the hook sees the user's constraints and the pins
    (work / "startup-hook.sh").write_text(f'{pip} det_free_probe\necho "$PIP_CONSTRAINT" > constraint.txt\n')
    assert run_startup_hook(work)
    named = (work / "constraint.txt").read_text().split()
    assert named[0] == str(user_constraints) and len(named) == 2
    assert not os.path.exists(named[1])  # the pins file is gone after the hook
    assert os.environ["PIP_CONSTRAINT"] == str(user_constraints)  # the trial keeps its own value

    # replacing one the platform runs on is refused by pip, and the run fails naming the hook
    (work / "startup-hook.sh").write_text(f"{pip} mdurl==99.0\n")
    with pytest.raises(StartupHookError, match="constraint"):
        run_startup_hook(work)
    assert importlib.metadata.version("mdurl") == pins["mdurl"]
