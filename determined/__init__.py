"""Determined: train PyTorch, tf.keras and tf.estimator Trials with hyperparameter search, on a laptop or a cluster."""
__version__ = "0.13.8.post1"
