"""The states and types of an interactive task, as Determined names them on the wire (`taskv1.State`)."""

QUEUED = "STATE_QUEUED"  # waiting for its slots
STARTING = "STATE_STARTING"  # its process started; a notebook or TensorBoard does not answer yet
RUNNING = "STATE_RUNNING"
TERMINATING = "STATE_TERMINATING"  # killed; its process has not ended yet
TERMINATED = "STATE_TERMINATED"

ALL = (QUEUED, STARTING, RUNNING, TERMINATING, TERMINATED)
ACTIVE = (QUEUED, STARTING, RUNNING, TERMINATING)
HOLDING = (STARTING, RUNNING, TERMINATING)  # a process runs and holds the task's slots

COMMAND = "COMMAND"
NOTEBOOK = "NOTEBOOK"
TENSORBOARD = "TENSORBOARD"
SHELL = "SHELL"
TYPES = (COMMAND, NOTEBOOK, TENSORBOARD, SHELL)

# What the CLI calls each type, for messages and default descriptions.
NAMES = {COMMAND: "Command", NOTEBOOK: "JupyterLab", TENSORBOARD: "TensorBoard", SHELL: "Shell"}
