"""`det master up` exactly as the CLI runs it, with tests/master/fake_trial.py as the trial program.

The fake trial speaks the real trial routes without importing a framework, so a server test starts and
restarts trials in a fraction of a second. Usage: python _serve_fake.py master up --port 0 ...
"""
import pathlib
import sys

from determined.cli.main import main
from determined.master.rm import local, trial_env

local.DEFAULT_TRIAL_COMMAND = (sys.executable, str(pathlib.Path(__file__).resolve().parent.parent / "master" / "fake_trial.py"))
# Trials get an allow-list of the master's environment: the fake trial's settings (FAKE_*) pass too.
trial_env.PASSED_PREFIXES = (*trial_env.PASSED_PREFIXES, "FAKE_")

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
