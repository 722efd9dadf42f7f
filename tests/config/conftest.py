import copy
from typing import Any, Callable, Dict

import pytest


def _minimal(**overrides: Any) -> Dict[str, Any]:
    config: Dict[str, Any] = {
        "entrypoint": "model_def:MyTrial",
        "hyperparameters": {"global_batch_size": 32},
        "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": 100}},
    }
    config.update(copy.deepcopy(overrides))
    return config


@pytest.fixture
def minimal() -> Callable[..., Dict[str, Any]]:
    """A factory of the smallest valid config, with top-level overrides."""
    return _minimal


@pytest.fixture
def with_searcher() -> Callable[..., Dict[str, Any]]:
    """A factory of the smallest valid config with the given searcher fields (metric preset)."""
    return lambda **searcher: _minimal(searcher={"metric": "validation_loss", **searcher})


@pytest.fixture
def minimal_config() -> Dict[str, Any]:
    return _minimal()
