"""The environment of one DeepSpeed rank on CPU (gloo on a free port of 127.0.0.1), for the child scripts of these
tests; import it before deepspeed. The compat shims of `determined.pytorch.deepspeed` are installed, and DeepSpeed's
shared-memory op is not built (a DeepSpeedTrial starts without it too)."""
import os
import socket

with socket.socket() as _s:
    _s.bind(("127.0.0.1", 0))
    _port = _s.getsockname()[1]
os.environ.update(DS_ACCELERATOR="cpu", RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_SIZE="1",
                  MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_port))

from determined.pytorch import deepspeed as _det_ds  # noqa: E402,F401  (installs the compat shims)
from determined.pytorch.deepspeed import _shims  # noqa: E402

_shims.skip_shm_comm_op()
