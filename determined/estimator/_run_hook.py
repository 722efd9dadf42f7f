"""RunHook: a tf.estimator.SessionRunHook that also hears about Determined's checkpoints and the trial's end."""
import tensorflow as tf


class RunHook(tf.estimator.SessionRunHook):
    """A SessionRunHook with three more callbacks, called by Determined.

    Put it among the hooks of the TrainSpec (or the EvalSpec) like any SessionRunHook; its
    ``begin``/``before_run``/``after_run``/``end`` methods run as usual.
    """

    def on_checkpoint_load(self, checkpoint_dir: str) -> None:
        """Called after the trial restored its state from the checkpoint in ``checkpoint_dir`` (read-only),
        before training continues."""

    def on_checkpoint_end(self, checkpoint_dir: str) -> None:
        """Called when a checkpoint has been written into ``checkpoint_dir``, before it is uploaded to
        checkpoint storage: files written there become part of the checkpoint."""

    def on_trial_close(self) -> None:
        """Called once when the trial process stops working on the trial (finished, or preempted)."""
