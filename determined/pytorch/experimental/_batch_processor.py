"""The class a user subclasses to process the batches of `torch_batch_process`."""
import abc
from typing import Any

from determined.pytorch.experimental._batch_context import TorchBatchProcessorContext


class TorchBatchProcessor(metaclass=abc.ABCMeta):
    """What to do with each batch. One instance per rank; `torch_batch_process` builds it with `context=`."""

    @abc.abstractmethod
    def __init__(self, context: TorchBatchProcessorContext) -> None:
        """Set up what processing needs (the model: `context.prepare_model_for_inference(model)`)."""

    @abc.abstractmethod
    def process_batch(self, batch: Any, batch_idx: int) -> None:
        """Process one batch of this rank's shard. `batch_idx` counts this rank's batches (0, 1, ...), so with 4
        ranks and 8 batches each rank sees batch_idx 0 and 1; a resumed run goes on from the checkpointed index."""

    def on_checkpoint_start(self) -> None:  # noqa: B027 -- optional hook, empty by default
        """Called on every rank right before the position is checkpointed: flush what the batches so far
        produced, since they are not processed again after a restart."""

    def on_finish(self) -> None:  # noqa: B027 -- optional hook, empty by default
        """Called on every rank once its whole shard is processed (not when the run stops for a preemption)."""
