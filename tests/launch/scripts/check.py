"""A script trial of the tests: prints what a script sees (its interpreter, arguments, directory and the
platform's variables, the config's and the startup hook's), then exits with the status in `hparams.status`; with `hparams.wait_for_sigterm` it
waits for SIGTERM first and says so."""
import os
import signal
import sys
import time

import determined as det

info = det.get_cluster_info()
names = ("DET_TRIAL_ID", "DET_EXPERIMENT_ID", "DET_SLOT_IDS", "DET_TASK_TYPE", "DET_HPARAMS", "DET_STEPS_COMPLETED",
         "FROM_CONFIG", "FROM_HOOK")
print(f"check: interpreter {sys.executable} args {sys.argv[1:]} files {sorted(os.listdir('.'))}", flush=True)
print("check: " + " ".join(f"{name}={os.environ.get(name)}" for name in names), flush=True)
print(f"check: trial {info.trial.trial_id} run {info.trial._trial_run_id} slots {info.slot_ids}", flush=True)
if info.trial.hparams.get("wait_for_sigterm"):
    signal.signal(signal.SIGTERM, lambda *_: (print("check: got SIGTERM", flush=True), sys.exit(0)))
    print("check: waiting for SIGTERM", flush=True)
    time.sleep(120)
sys.exit(int(info.trial.hparams.get("status", 0)))
