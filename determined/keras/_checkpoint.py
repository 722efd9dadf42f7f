"""What a TFKerasTrial checkpoint holds, writing it, restoring it, and loading its model back.

Files: `determined-keras-model-weights.*` (TF-format weights of the model and of its optimizer),
`rng_state.pkl` (python, numpy and TensorFlow generator states), `trial_state.json` (batches trained, last
validation, data loader position) and `load_data.json` (how to rebuild the trial). Checkpoints of the
Native API also hold the whole model as `determined-keras-model.h5`, the format of releases before 0.13.8.
"""
import json
import logging
import pathlib
import pickle
import random
import warnings
from typing import Any, Dict, Optional

import numpy as np
import tensorflow as tf

from determined import _execution, errors
from determined.keras._build_model import build_checked_model

logger = logging.getLogger("determined.keras")

WEIGHTS_FILE = "determined-keras-model-weights"
H5_MODEL_FILE = "determined-keras-model.h5"
RNG_FILE = "rng_state.pkl"
TRIAL_STATE_FILE = "trial_state.json"
LOAD_DATA_FILE = "load_data.json"
FORMAT = "saved_weights"
H5_FORMAT = "h5"


def framework() -> str:
    return f"tensorflow-{tf.__version__}"


def capture_rng_state() -> Dict[str, Any]:
    state: Dict[str, Any] = {"random_rng_state": random.getstate(), "np_rng_state": np.random.get_state()}
    if tf.executing_eagerly():
        state["tf_rng_state"] = tf.random.get_global_generator().state.numpy()
    return state


def restore_rng_state(state: Dict[str, Any]) -> None:
    if "random_rng_state" in state:
        random.setstate(state["random_rng_state"])
    if "np_rng_state" in state:
        np.random.set_state(state["np_rng_state"])
    if "tf_rng_state" in state and tf.executing_eagerly():
        tf.random.get_global_generator().reset(state["tf_rng_state"])


def build_optimizer(model: tf.keras.Model) -> None:
    """Create the optimizer's slot variables now, so that loading weights restores them at once."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or not tf.executing_eagerly():
        return
    if isinstance(optimizer, tf.keras.optimizers.Optimizer) and not getattr(optimizer, "_built", False):
        optimizer.build(model.trainable_variables)


def write_checkpoint(
    path: pathlib.Path,
    model: tf.keras.Model,
    trial_state: Dict[str, Any],
    load_data: Dict[str, Any],
    *,
    full_model: bool = False,
) -> None:
    model.save_weights(str(path / WEIGHTS_FILE), save_format="tf")
    with open(path / RNG_FILE, "wb") as f:
        pickle.dump(capture_rng_state(), f)
    (path / TRIAL_STATE_FILE).write_text(json.dumps(trial_state, indent=2))
    (path / LOAD_DATA_FILE).write_text(json.dumps(load_data, indent=2, default=str))
    if full_model:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*HDF5 file.*legacy", category=UserWarning)
            model.save(str(path / H5_MODEL_FILE), save_format="h5")


def restore_weights(path: pathlib.Path, model: tf.keras.Model) -> None:
    """Load the checkpoint's model (and optimizer) weights into `model`."""
    if (path / f"{WEIGHTS_FILE}.index").is_file():
        build_optimizer(model)
        status = model.load_weights(str(path / WEIGHTS_FILE))
        if tf.executing_eagerly():
            status.assert_existing_objects_matched()
        return
    if (path / H5_MODEL_FILE).is_file():
        model.load_weights(str(path / H5_MODEL_FILE))
        return
    raise errors.DeterminedError(
        f"{path} holds no tf.keras weights: neither {WEIGHTS_FILE}.index nor {H5_MODEL_FILE} is there"
    )


def read_trial_state(path: pathlib.Path) -> Dict[str, Any]:
    file = path / TRIAL_STATE_FILE
    return json.loads(file.read_text()) if file.is_file() else {}


def read_rng_state(path: pathlib.Path) -> Optional[Dict[str, Any]]:
    file = path / RNG_FILE
    if not file.is_file():
        return None
    with open(file, "rb") as f:
        state = pickle.load(f)
    return state if isinstance(state, dict) else None


def trial_class_spec(trial_class: type) -> str:
    return f"{trial_class.__module__}:{trial_class.__qualname__}"


def load_model_from_checkpoint_path(path: str, **load_model_kwargs: Any) -> tf.keras.Model:
    """The compiled tf.keras model of the checkpoint at `path`, with its weights loaded.

    A TFKerasTrial checkpoint is loaded by rebuilding the trial (its class is imported by the name recorded
    in load_data.json: the model definition, e.g. the checkpoint's ``code/``, must be importable) and calling
    build_model(); a Native API or pre-0.13.8 checkpoint by ``tf.keras.models.load_model`` on its h5 file
    (`load_model_kwargs`, e.g. custom_objects, go there).
    """
    from determined import core

    ckpt = pathlib.Path(path)
    load_file = ckpt / LOAD_DATA_FILE
    load_data = json.loads(load_file.read_text()) if load_file.is_file() else {}
    spec = load_data.get("trial_cls_spec")
    if not spec:
        if not (ckpt / H5_MODEL_FILE).is_file():
            raise errors.DeterminedError(
                f"{path} is not a tf.keras checkpoint of this platform: it has neither {LOAD_DATA_FILE} naming "
                f"the trial class nor {H5_MODEL_FILE}"
            )
        return tf.keras.models.load_model(str(ckpt / H5_MODEL_FILE), **load_model_kwargs)
    trial_class = _execution.import_trial_class(spec, ckpt / "code")
    config = load_data.get("experiment_config") or {}
    hparams = load_data.get("hparams") or {}
    seed = int(load_data.get("trial_seed") or 0)
    core_context = core._make_local_context(str(ckpt.parent), [], config, hparams, seed)
    context = trial_class.trial_context_class(core_context, config, hparams, seed)
    trial = trial_class(context)
    model = build_checked_model(trial, context, trial_class.__name__)
    restore_weights(ckpt, model)
    return model
