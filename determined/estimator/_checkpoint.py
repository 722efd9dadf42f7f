"""The files of an Estimator checkpoint: the model dir's latest checkpoint, SavedModel exports, load_data.json.

Layout of a checkpoint directory (itself usable as an Estimator model_dir):
  checkpoint, model.ckpt-<global step>.{index,data-*,meta}, graph.pbtxt   the training state
  <name>/saved_model.pb, <name>/variables/...                           one SavedModel per serving fn
  load_data.json                                                        framework, format, serving names
"""
import json
import pathlib
import shutil
import tempfile
from typing import Any, Callable, Dict, List, Optional

import tensorflow as tf

from determined import errors

FORMAT = "saved_model"
LOAD_DATA_FILE = "load_data.json"
_STATE_FILE = "checkpoint"
_GRAPH_FILE = "graph.pbtxt"


def framework() -> str:
    return f"tensorflow-{tf.__version__}"


def _write_state_file(directory: pathlib.Path, prefix_name: str) -> None:
    (directory / _STATE_FILE).write_text(
        f'model_checkpoint_path: "{prefix_name}"\nall_model_checkpoint_paths: "{prefix_name}"\n'
    )


def copy_training_state(ckpt_prefix: str, dst: pathlib.Path) -> None:
    """Copy the files of the TF checkpoint `ckpt_prefix` (and the graph) into `dst`, with a state file
    naming it as the latest checkpoint."""
    prefix = pathlib.Path(ckpt_prefix)
    files = sorted(prefix.parent.glob(prefix.name + ".*"))
    if not files:
        raise errors.DeterminedError(f"the Estimator wrote no checkpoint files at {ckpt_prefix}")
    for file in files:
        shutil.copy2(file, dst / file.name)
    graph = prefix.parent / _GRAPH_FILE
    if graph.is_file():
        shutil.copy2(graph, dst / _GRAPH_FILE)
    _write_state_file(dst, prefix.name)


def restore_training_state(ckpt_dir: pathlib.Path, model_dir: pathlib.Path) -> str:
    """Copy a checkpoint's training state into an empty model dir; returns the TF checkpoint's name."""
    state = tf.train.get_checkpoint_state(str(ckpt_dir))
    if state is None or not state.model_checkpoint_path:
        raise errors.DeterminedError(
            f"checkpoint directory {ckpt_dir} holds no Estimator checkpoint (no '{_STATE_FILE}' file): it was "
            "not written by an EstimatorTrial"
        )
    name = pathlib.Path(state.model_checkpoint_path).name
    for file in ckpt_dir.glob(name + ".*"):
        shutil.copy2(file, model_dir / file.name)
    if (ckpt_dir / _GRAPH_FILE).is_file():
        shutil.copy2(ckpt_dir / _GRAPH_FILE, model_dir / _GRAPH_FILE)
    _write_state_file(model_dir, name)
    return name


def export_serving_models(
    estimator: tf.estimator.Estimator,
    serving_fns: Dict[str, Callable[..., Any]],
    ckpt_prefix: str,
    dst: pathlib.Path,
) -> None:
    """Export one SavedModel per serving_input_receiver_fn into `dst/<name>`."""
    for name, fn in sorted(serving_fns.items()):
        base = pathlib.Path(tempfile.mkdtemp(prefix="det-export-"))
        try:
            exported = estimator.export_saved_model(str(base), fn, checkpoint_path=ckpt_prefix)
            if isinstance(exported, bytes):
                exported = exported.decode()
            shutil.move(str(exported), str(dst / name))
        finally:
            shutil.rmtree(base, ignore_errors=True)


def write_load_data(dst: pathlib.Path, data: Dict[str, Any]) -> None:
    (dst / LOAD_DATA_FILE).write_text(json.dumps(data, indent=2, sort_keys=True, default=str))


def saved_model_dirs(path: pathlib.Path) -> Dict[str, pathlib.Path]:
    """The SavedModels in a checkpoint directory, by the name of their serving_input_receiver_fn."""
    found = {}
    for pb in sorted(path.glob("*/saved_model.pb")):
        found[pb.parent.name] = pb.parent
    return found


def load_estimator_from_checkpoint_path(
    path: str, tags: Optional[List[str]] = None, export_name: Optional[str] = None
) -> Any:
    """Load the SavedModel exported into an EstimatorTrial checkpoint with ``tf.saved_model.load``.

    ``tags`` select the MetaGraph (default ``["serve"]``). When the trial exported several SavedModels
    (several serving_input_receiver_fns), ``export_name`` names the one to load.
    """
    ckpt = pathlib.Path(path)
    models = saved_model_dirs(ckpt)
    if not models:
        raise errors.DeterminedError(
            f"checkpoint {path} holds no SavedModel: the trial exports one per entry of "
            "build_serving_input_receiver_fns() (or the Native API's context.serving_input_receiver_fns); "
            "return at least one to load the checkpoint, or restore its files with tf.estimator.Estimator("
            "model_fn, model_dir=<checkpoint dir>)"
        )
    if export_name is None:
        if len(models) > 1:
            raise errors.DeterminedError(
                f"checkpoint {path} holds several SavedModels ({', '.join(models)}): pass "
                "export_name=<one of them> to load()"
            )
        export_name = next(iter(models))
    if export_name not in models:
        raise errors.DeterminedError(
            f"checkpoint {path} has no SavedModel {export_name!r}; it has: {', '.join(models)}"
        )
    return tf.saved_model.load(str(models[export_name]), tags=list(tags) if tags else ["serve"])
