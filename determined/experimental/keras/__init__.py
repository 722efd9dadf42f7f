"""The Native API for tf.keras: `init()` returns a context; wrap, compile and fit a model as usual."""
from determined.experimental.keras._init import Mode, init

__all__ = ["Mode", "init"]
