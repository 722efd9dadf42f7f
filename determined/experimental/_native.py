"""The Native API entry points of seed 002: create() and create_trial_instance()."""
import contextlib
import enum
import os
import pathlib
import random
import sys
from typing import Any, Dict, Iterator, List, Optional, Type, Union

from determined import config as det_config, errors
from determined.experimental import _run


class Mode(enum.Enum):
    """Where a Native API `init()` runs the experiment: submitted to a master (CLUSTER) or tested here (LOCAL)."""

    CLUSTER = "cluster"
    LOCAL = "local"


def _jsonable(value: Any) -> Any:
    if hasattr(value, "to_dict") and callable(value.to_dict):
        return value.to_dict()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _native_command(command: Optional[List[str]], context_dir: str) -> List[str]:
    if command:
        return list(command)
    argv = list(sys.argv)
    if not argv or not argv[0] or argv[0] in ("-c", "-m") or not pathlib.Path(argv[0]).is_file():
        raise errors.DeterminedError(
            "create(): cannot infer the training command from sys.argv (running in IPython, a notebook or "
            "`python -c`?); pass command=['train.py', ...] naming the script inside context_dir"
        )
    script = pathlib.Path(argv[0]).resolve()
    try:
        argv[0] = script.relative_to(pathlib.Path(context_dir).resolve()).as_posix()
    except ValueError:
        raise errors.DeterminedError(
            f"create(): the script {str(script)!r} is not inside context_dir {context_dir!r}; the trials run it "
            "from the uploaded context dir, so put the script there or pass context_dir= its folder"
        ) from None
    return argv


@contextlib.contextmanager
def _working_dir(context_dir: str) -> Iterator[None]:
    """Run the block with `context_dir` (when given) as the working directory, as the trials run the code."""
    if not context_dir:
        yield
        return
    if not pathlib.Path(context_dir).is_dir():
        raise errors.DeterminedError(f"create(): context_dir {context_dir!r} is not a directory")
    previous = os.getcwd()
    os.chdir(context_dir)
    try:
        yield
    finally:
        os.chdir(previous)


def test_config(raw: Dict[str, Any], seed: Optional[int] = None) -> Dict[str, Any]:
    """The cluster test-mode config of an experiment: one batch, one validation, one checkpoint."""
    canonical = det_config.load_experiment_config(raw)
    rng = random.Random(seed)
    hparams = det_config.sample_hparams(canonical["hyperparameters"], rng)
    return det_config.make_test_config(canonical, hparams)


def submit(
    raw: Dict[str, Any], context_dir: Optional[str], command: Optional[List[str]], *, local: bool, test: bool,
    master_url: Optional[str], caller: str,
) -> _run.Description:
    """Run (local) or submit an experiment whose trials run `command` in `context_dir`; its description at the end.

    `context_dir` defaults to the working directory for a local run; a cluster run needs it (it is what is uploaded).
    `caller` names the public function in the errors.
    """
    if not context_dir:
        if not local:
            raise errors.DeterminedError(
                f"{caller}: context_dir is required when not running locally: it is the directory uploaded with the "
                "experiment (for example context_dir='.')"
            )
        context_dir = os.getcwd()
    if not pathlib.Path(context_dir).is_dir():
        raise errors.DeterminedError(f"{caller}: context_dir {context_dir!r} is not a directory")
    internal = dict(raw.get("internal") or {})
    internal["native"] = {"command": _native_command(command, context_dir)}
    raw = {**raw, "internal": internal}
    if test:
        raw = test_config(raw)
    return _run.run_experiment(raw, context_dir, master=None if local else master_url, local=local)


def create(
    trial_def: Type[Any],
    config: Optional[Union[Dict[str, Any], str, "os.PathLike[str]"]] = None,
    local: bool = False,
    test: bool = False,
    context_dir: str = "",
    command: Optional[List[str]] = None,
    master_url: Optional[str] = None,
) -> Any:
    """Create an experiment.

    Args:
        trial_def: A class definition implementing the ``determined.Trial`` interface.
        config: A dictionary representing the experiment configuration to be associated with the experiment
            (or the path of a YAML config file, or its YAML text, read as YAML 1.2 like ``det experiment create``).
        local: A boolean indicating if training should be done locally. When ``False``, the experiment will be
            submitted to the Determined cluster (or, with no master configured, run on the embedded master of
            the local data dir). Defaults to ``False``.
        test: A boolean indicating if the experiment should be shortened to a minimal loop of training on a small
            amount of data, performing validation, and checkpointing.
        context_dir: A string filepath that defines the context directory. All model code will be executed with
            this as the current working directory. When ``local=False`` it is required; when ``local=True`` it
            defaults to the current working directory.
        command: The entrypoint of the training script in the task environment; inferred from ``sys.argv``.
        master_url: The master URL when ``local=False``; defaults to ``DET_MASTER``.
    """
    from determined import _execution

    if os.environ.get("DET_TRIAL_ID"):
        return _execution.run_native_trial(trial_def)

    raw = _jsonable(dict(det_config.config_from(config) if config is not None else {}))
    if local and test:
        with _working_dir(context_dir):
            return _execution.test_one_batch(trial_def, raw)

    desc = submit(raw, context_dir, command, local=local, test=test, master_url=master_url, caller="create()")
    return desc.id


def create_trial_instance(
    trial_def: Type[Any],
    checkpoint_dir: str,
    config: Optional[Dict[str, Any]] = None,
    hparams: Optional[Dict[str, Any]] = None,
) -> Any:
    """Create a trial instance from a Trial class definition, for debugging trial logic anywhere.

    Args:
        trial_def: A class definition that inherits from the ``det.Trial`` interface.
        checkpoint_dir: The checkpoint directory that the trial will use for loading and saving checkpoints.
        config: An optional experiment configuration used to initialize the ``determined.TrialContext``. If not
            specified, a minimal default is used.
        hparams: Hyperparameter values; sampled from the config when not given.
    """
    from determined import _execution

    return _execution.create_trial_instance(trial_def, checkpoint_dir, _jsonable(config) if config else None, hparams)

