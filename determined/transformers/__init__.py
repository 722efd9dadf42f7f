"""determined.transformers: `DetCallback`, Determined 0.38's callback for the Hugging Face `transformers.Trainer`
(docs/transformers.md). Needs the `transformers` extra: `pip install 'determined-revived[transformers]'`."""
try:
    import transformers  # noqa: F401
except ImportError as e:  # pragma: no cover -- depends on what is installed
    raise ImportError(
        "determined.transformers needs Hugging Face transformers (with accelerate, for its Trainer), which is not "
        f"installed ({e}): pip install 'determined-revived[transformers]'"
    ) from e

from determined.transformers._hf_callback import DetCallback  # noqa: E402

__all__ = ["DetCallback"]
