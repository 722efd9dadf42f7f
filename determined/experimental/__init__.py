"""The Native API (create, create_trial_instance) and, with the client issue, the Python SDK."""
from determined.experimental._native import create, create_trial_instance

__all__ = ["create", "create_trial_instance"]
