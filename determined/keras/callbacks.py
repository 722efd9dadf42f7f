"""determined.keras.callbacks: Keras callbacks that know the trial they run in.

`TensorBoard` is Keras's TensorBoard callback writing into the trial's TensorBoard directory, where
`det tensorboard start <experiment id>` serves it (Determined 0.14+ name; 0.12/0.13 code calls it
`determined.keras.TFKerasTensorBoard`).
"""
import logging
from typing import Any

import tensorflow as tf

logger = logging.getLogger("determined.keras")


class TensorBoard(tf.keras.callbacks.TensorBoard):
    """Keras's ``tf.keras.callbacks.TensorBoard`` with its ``log_dir`` set to the trial's TensorBoard directory
    (a ``log_dir`` passed in is ignored; the trial's controller points the callback at its own trial). Its runs
    appear under the trial's in ``det tensorboard start``: ``trial_<id>/train`` and ``trial_<id>/validation``.
    Every other argument is Keras's (``update_freq``, ``histogram_freq``, ``profile_batch``, ...)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        from determined import tensorboard

        if args or "log_dir" in kwargs:
            given = kwargs.pop("log_dir", args[0] if args else None)
            args = args[1:]
            logger.warning("TensorBoard(log_dir=%r): log_dir is ignored; the callback writes into the trial's "
                           "TensorBoard directory", given)
        super().__init__(str(tensorboard.get_base_path()), *args, **kwargs)


class TFKerasTensorBoard(TensorBoard):
    """The Determined 0.12/0.13 name of ``determined.keras.callbacks.TensorBoard``."""


__all__ = ["TFKerasTensorBoard", "TensorBoard"]
