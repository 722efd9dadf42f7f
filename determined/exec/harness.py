"""`python -m determined.exec.harness [TRIAL_CLASS]`: the entry point of every trial process.

It reads DET_MASTER, DET_TRIAL_ID, DET_ALLOCATION_ID and DET_SESSION_TOKEN, fetches the trial's context (and
sets the config's `environment.environment_variables`), exports the trial's identity as `DET_*` variables
(`det.get_cluster_info()` reads them), fetches the experiment's model definition, unpacks it into a fresh work
directory, runs its `startup-hook.sh` if it has one, and runs the trial: the config's `entrypoint` Trial class
through its controller, the entrypoint's command (a script: exec/_script.py), or the Native API command's
script. Exit status 0 when the trial finished or was preempted; 1 when the user's code failed; 3 when the
master stayed unreachable; a script's own status.

A Trial class on several slots runs one harness per slot under `python -m determined.exec.launch`, which sets
RANK/WORLD_SIZE and the chief's address; `core.init()` connects the ranks, and only the chief (rank 0)
pulls searcher operations and reports to the master. With TRIAL_CLASS (`module:Class`) the harness is one
worker of a launcher (`determined.launch.torch_distributed --trial ...`) started by a script entrypoint: it runs
that Trial class in the current directory, where the script's harness unpacked the model definition.
"""
import logging
import os
import pathlib
import runpy
import shutil
import sys
import tempfile
import traceback
from typing import Any, Dict, List, Optional

import httpx

from determined import _numpy_compat, core, errors
from determined.common import data_dir
from determined.common.api import Session, http_client, make_url
from determined.config import no_effect_notes
from determined.config.entrypoint import command_of, runs_a_script
from determined.core._context import MASTER_RETRIES, hand_over_trial_context
from determined.core._info import ClusterInfo, trial_environment
from determined.exec import _script
from determined.exec._environment import apply_environment_variables, take_run_context
from determined.exec._model_def import extract_model_def
from determined.exec._startup_hook import StartupHookError, run_startup_hook
from determined.exec._startup_hook import forget_status as forget_startup_hook_status
from determined.tensorflow import _tf1_compat

logger = logging.getLogger("determined.harness")

EXIT_OK = 0
EXIT_USER_ERROR = 1
EXIT_MASTER_UNREACHABLE = 3
SESSION_TIMEOUT_S = 60.0


def make_http_client() -> httpx.Client:
    """The HTTP client of the harness's session, before the master's URL is known (`main(client=...)`)."""
    return http_client(timeout=SESSION_TIMEOUT_S)


def _setup_logging() -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.INFO)
    for noisy in ("httpx", "httpcore"):  # one line per request (preemption polls every second) is noise
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _required_env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise errors.DeterminedError(
            f"environment variable {name} is not set: the harness runs inside trial processes started by a master"
        )
    return value


def _make_work_dir(trial_id: int) -> pathlib.Path:
    base = data_dir() / "work"
    try:
        base.mkdir(parents=True, exist_ok=True)
        return pathlib.Path(tempfile.mkdtemp(prefix=f"trial-{trial_id}-", dir=base))
    except OSError:
        return pathlib.Path(tempfile.mkdtemp(prefix=f"det-trial-{trial_id}-"))


def _run_native_command(command: List[str]) -> None:
    script = command[0]
    if not pathlib.Path(script).is_file():
        raise errors.DeterminedError(
            f"the Native API command's script {script!r} is not in the model directory"
        )
    sys.argv = list(command)
    _tf1_compat.install_when_imported()  # TensorFlow 1.x idioms of the script, if it imports TensorFlow
    _numpy_compat.install_when_imported()  # NumPy's removed aliases (np.int, ...), if the script uses NumPy
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        if e.code not in (None, 0):
            raise


def _export_trial_environment(context: Dict[str, Any], spill_dir: pathlib.Path) -> Dict[str, str]:
    """Set the `DET_*` variables of the trial in this process (for the trial's code and every process it
    starts); returns them."""
    info = ClusterInfo._from_answer(context, os.environ["DET_MASTER"])
    env = trial_environment(info, str(spill_dir))
    os.environ.update(env)
    return env


def _run_trial_class(entrypoint: str, work_dir: pathlib.Path) -> None:
    from determined import _execution

    trial_class = _execution.load_trial_class(entrypoint, str(work_dir))
    with core.init() as core_context:
        _execution.run_trial(trial_class, core_context)


def _run(session: Session, trial_id: int) -> int:
    # What the run starts with (the context, the model definition, the first operation): handed over by the
    # resource manager that started it, else in one request.
    context: Dict[str, Any] = take_run_context(trial_id) or session.get(
        f"/trials/{trial_id}/context", params={"with_model_def": "true", "with_operation": "true"})
    model_def = context.pop("model_def", None)
    config: Dict[str, Any] = context["config"]
    apply_environment_variables(config)  # may start this process again with them (PYTHON* variables)
    hand_over_trial_context(trial_id, context)
    experiment_id = int(context["experiment_id"])
    if not isinstance(model_def, dict) or "b64_tgz" not in model_def:
        model_def = session.get(f"/experiments/{experiment_id}/model_def")
    work_dir = _make_work_dir(trial_id)
    run_dir = work_dir.with_name(work_dir.name + ".run")  # the run's own files, outside the model dir
    previous_cwd = os.getcwd()
    hook_ran = False
    try:
        trial_env = _export_trial_environment(context, run_dir)
        extract_model_def(model_def["b64_tgz"], str(work_dir))
        os.chdir(work_dir)
        for note in no_effect_notes(config):
            logger.info("config: %s", note)
        hook_ran = run_startup_hook(work_dir)
        sys.path.insert(0, str(work_dir))
        native_command: Optional[List[str]] = ((config.get("internal") or {}).get("native") or {}).get("command")
        logger.info(
            "trial %d of experiment %d starting in %s (%s)", trial_id, experiment_id, work_dir,
            f"native command {native_command}" if native_command else f"entrypoint {config.get('entrypoint')}",
        )
        if native_command:
            _run_native_command(native_command)
        elif runs_a_script(config):
            env = _script.script_environment(os.environ, trial_env, _script.write_python_shims(run_dir / "bin"))
            return _script.run_command(command_of(config["entrypoint"]), str(work_dir), env)
        else:
            _run_trial_class(config.get("entrypoint") or "", work_dir)
    finally:
        if hook_ran:
            forget_startup_hook_status()
        os.chdir(previous_cwd)
        shutil.rmtree(work_dir, ignore_errors=True)
        shutil.rmtree(run_dir, ignore_errors=True)
    return EXIT_OK


def _run_worker(session: Session, trial_id: int, entrypoint: str) -> int:
    """One worker of a launcher started by a script: the Trial class `entrypoint`, in the current directory."""
    context: Dict[str, Any] = session.get(f"/trials/{trial_id}/context")
    hand_over_trial_context(trial_id, context)
    work_dir = pathlib.Path.cwd()
    sys.path.insert(0, str(work_dir))
    logger.info("trial %d: rank %s runs the Trial class %s in %s", trial_id, os.environ.get("RANK", "0"),
                entrypoint, work_dir)
    _run_trial_class(entrypoint, work_dir)
    return EXIT_OK


def _rank() -> int:
    try:
        return int(os.environ.get("RANK") or 0)
    except ValueError:
        return 0


def _report_unrecoverable(session: Session, trial_id: int) -> None:
    """A restart would fail the same way, so the trial ends now (reported once, by the chief)."""
    if _rank() != 0:
        return
    logger.error("trial %d cannot succeed as written; it is not restarted", trial_id)
    try:
        session.post(f"/trials/{trial_id}/early_exit", {"reason": "ERRORED"})
    except errors.DeterminedError as e:
        logger.warning("could not report the early exit: %s", e)


def main(client: Optional[httpx.Client] = None, argv: Optional[List[str]] = None) -> int:
    """Run the trial of this process's environment; `client` (from `make_http_client`) is the session's HTTP
    client, built in advance by a prestarted process (determined.exec.prestart). `argv` (the command line's
    arguments) may name a Trial class `module:Class` to run as one worker of a launcher."""
    _setup_logging()
    args = list(argv or [])
    if len(args) > 1 or (args and ":" not in args[0]):
        print(f"harness: expected at most one argument, a Trial class `module:Class`, got {args}", file=sys.stderr)
        return EXIT_USER_ERROR
    try:
        master = _required_env("DET_MASTER")
        trial_id = int(_required_env("DET_TRIAL_ID"))
    except (errors.DeterminedError, ValueError) as e:
        print(f"harness: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    if client is not None:
        client.base_url = httpx.URL(make_url(master))
    session = Session(master, os.environ.get("DET_SESSION_TOKEN") or None, retries=MASTER_RETRIES, client=client)
    try:
        code = _run_worker(session, trial_id, args[0]) if args else _run(session, trial_id)
    except errors.MasterNotFoundError as e:
        logger.error("giving up: %s", e)
        print(f"harness: {e}", file=sys.stderr)
        return EXIT_MASTER_UNREACHABLE
    except StartupHookError as e:
        logger.error("trial %d failed: %s", trial_id, e)
        return EXIT_USER_ERROR
    except BaseException as e:  # noqa: B036 -- the user's code may raise anything, even SystemExit(1)
        if isinstance(e, KeyboardInterrupt):
            raise
        traceback.print_exc(file=sys.stderr)
        logger.error("trial %d failed: %s", trial_id, e.__class__.__name__)
        # A Trial that breaks the API, or a report the master refused as invalid (a searcher metric the
        # validation does not return, say), fails the same way on every restart: end the trial now.
        if isinstance(e, errors.InvalidTrialError) or (isinstance(e, errors.APIError) and e.status_code == 400):
            _report_unrecoverable(session, trial_id)
        return EXIT_USER_ERROR
    finally:
        session.close()
    if code == EXIT_OK:
        logger.info("trial %d exits normally", trial_id)
    return code


if __name__ == "__main__":
    from determined.common._exit import exit_process

    exit_process(main(argv=sys.argv[1:]))
