"""Determined's state names for experiments, trials and checkpoints."""

# experiments
ACTIVE = "ACTIVE"
PAUSED = "PAUSED"
STOPPING_CANCELED = "STOPPING_CANCELED"
STOPPING_COMPLETED = "STOPPING_COMPLETED"
STOPPING_ERROR = "STOPPING_ERROR"
COMPLETED = "COMPLETED"
CANCELED = "CANCELED"
ERROR = "ERROR"

# trials (besides ACTIVE, PAUSED, COMPLETED, CANCELED, ERROR)
STOPPING_KILLED = "STOPPING_KILLED"

# checkpoints (besides ACTIVE, COMPLETED, ERROR)
DELETED = "DELETED"

EXPERIMENT_TERMINAL = frozenset({COMPLETED, CANCELED, ERROR})
TRIAL_TERMINAL = frozenset({COMPLETED, CANCELED, ERROR})
# Every state a trial can be in that is not terminal: a trial's state is always in one of the two sets, so
# "open" is asked as `state IN TRIAL_OPEN`, which the index on (experiment_id, state) answers without reading the
# experiment's ended trials (`NOT IN TRIAL_TERMINAL` reads them all: thousands in a large search).
TRIAL_OPEN = frozenset({ACTIVE, PAUSED, STOPPING_KILLED, STOPPING_CANCELED})
