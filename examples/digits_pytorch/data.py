"""The digits data set of scikit-learn (8x8 images of handwritten digits), split 80/20 with a fixed seed."""
from typing import Tuple

import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

SPLIT_SEED = 0
VALIDATION_FRACTION = 0.2


def load_datasets() -> Tuple[torch.utils.data.TensorDataset, torch.utils.data.TensorDataset]:
    """(training, validation) datasets of (features, label); features standardised with training statistics."""
    features, labels = load_digits(return_X_y=True)
    x_train, x_val, y_train, y_val = train_test_split(
        features, labels, test_size=VALIDATION_FRACTION, random_state=SPLIT_SEED, stratify=labels
    )
    mean = x_train.mean(axis=0)
    std = x_train.std(axis=0)
    std[std == 0] = 1.0  # pixels that are always blank in the training images

    def dataset(x: np.ndarray, y: np.ndarray) -> torch.utils.data.TensorDataset:
        x = torch.tensor((x - mean) / std, dtype=torch.float32)
        return torch.utils.data.TensorDataset(x, torch.tensor(y, dtype=torch.int64))

    return dataset(x_train, y_train), dataset(x_val, y_val)
