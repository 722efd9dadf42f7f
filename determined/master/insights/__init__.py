"""What the master computes for researchers to look at: learning curves, hyperparameter importance, TensorBoards."""
