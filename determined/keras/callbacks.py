"""determined.keras.callbacks: Keras callbacks that know the trial they run in.

`TensorBoard` is Keras's TensorBoard callback writing into the trial's TensorBoard directory, where
`det tensorboard start <experiment id>` serves it (Determined 0.14+ name; 0.12/0.13 code calls it
`determined.keras.TFKerasTensorBoard`).
"""
import logging
from typing import Any, Dict, Tuple

import tensorflow as tf

logger = logging.getLogger("determined.keras")


class TensorBoard(tf.keras.callbacks.TensorBoard):
    """Keras's ``tf.keras.callbacks.TensorBoard`` with its ``log_dir`` set to the trial's TensorBoard directory
    (a ``log_dir`` passed in is ignored; the trial's controller points the callback at its own trial). Its runs
    appear under the trial's in ``det tensorboard start``: ``trial_<id>/train`` and ``trial_<id>/validation``.
    Every other argument is Keras's (``update_freq``, ``histogram_freq``, ``profile_batch``, ...)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from determined import tensorboard

        super().__init__(str(tensorboard.get_base_path()), *drop_log_dir("TensorBoard", args, kwargs), **kwargs)


def drop_log_dir(name: str, args: Tuple[Any, ...], kwargs: Dict[str, Any]) -> Tuple[Any, ...]:
    """Keras TensorBoard's arguments without `log_dir` (its first positional argument, or the keyword, which is
    removed from `kwargs`): the trial's directory replaces it, with a warning when one was given."""
    if "log_dir" in kwargs or args:
        if "log_dir" in kwargs:
            given = kwargs.pop("log_dir")
        else:
            given, args = args[0], args[1:]
        logger.warning("%s(log_dir=%r): log_dir is ignored; the callback writes into the trial's TensorBoard "
                       "directory", name, given)
    return args


class TFKerasTensorBoard(TensorBoard):
    """The Determined 0.12/0.13 name of ``determined.keras.callbacks.TensorBoard``."""


__all__ = ["TFKerasTensorBoard", "TensorBoard"]
