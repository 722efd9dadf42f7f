"""The iris data set (it ships with scikit-learn): a fixed split of 120 training and 30 validation records."""
from typing import Tuple

import numpy as np
from sklearn.datasets import load_iris

FEATURES = 4
CLASSES = 3


def iris_split(train: bool) -> Tuple[np.ndarray, np.ndarray]:
    data = load_iris()
    order = np.random.RandomState(0).permutation(len(data.target))
    idx = order[:120] if train else order[120:]
    return data.data[idx].astype(np.float32), data.target[idx].astype(np.int32)
