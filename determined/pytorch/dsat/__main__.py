"""`python3 -m determined.pytorch.dsat {binary,random,asha} CONFIG MODEL_DIR [options]` (docs/dsat.md)."""
import logging
import sys

import determined as det
from determined.pytorch.dsat._run_dsat import main

if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format=det.LOG_FORMAT)
    sys.exit(main())
