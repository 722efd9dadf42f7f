"""scikit-learn's iris data: 120 training and 30 validation records, standardised, labels one-hot."""
from typing import Tuple

import numpy as np
from sklearn.datasets import load_iris
from sklearn.model_selection import train_test_split


def load_split(split: str) -> Tuple[np.ndarray, np.ndarray]:
    iris = load_iris()
    x = iris.data.astype("float32")
    y = np.eye(3, dtype="float32")[iris.target]
    x_train, x_val, y_train, y_val = train_test_split(x, y, test_size=0.2, random_state=0, stratify=iris.target)
    mean, std = x_train.mean(axis=0), x_train.std(axis=0)
    if split == "train":
        return (x_train - mean) / std, y_train
    if split == "validation":
        return (x_val - mean) / std, y_val
    raise ValueError(f"split must be 'train' or 'validation', not {split!r}")
