"""Which values TensorBoard can show as scalars."""
from typing import Any

import numpy as np


def is_numerical_scalar(value: Any) -> bool:
    """Whether `value` is a number TensorBoard can plot: a python int or float (not a bool), a numpy number,
    or a 0-dimensional numeric numpy array."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float, np.number)):
        return True
    return isinstance(value, np.ndarray) and value.ndim == 0 and np.issubdtype(value.dtype, np.number)
