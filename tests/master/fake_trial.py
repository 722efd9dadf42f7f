"""A Trial-less fake trial program speaking the trial routes, launched by the local RM in the master tests.

Behaviour comes from environment variables: FAKE_DIR (records and markers), FAKE_CHUNK (batches per
training report), FAKE_SLEEP (seconds per chunk), FAKE_CKPT_EVERY (batches between checkpoints),
FAKE_HANG_AT (on its first run, the trial writes its pid to FAKE_DIR/pid-<trial> at this step and hangs),
FAKE_CRASH_TRIAL (these trial ids, comma-separated, always exit 3 after their first chunk), FAKE_STORE (1:
checkpoints are real directories written through the experiment's checkpoint storage), FAKE_PRINT_BYTES (at
start, print one line of that many bytes), FAKE_PRINT_LINES (at start, print that many numbered lines),
FAKE_GATE (a path: train only once it exists).
"""
import os
import sys
import time
import uuid

from determined.common.api import Session

env = os.environ
trial_id = int(env["DET_TRIAL_ID"])
allocation_id = env["DET_ALLOCATION_ID"]
fake_dir = env["FAKE_DIR"]
chunk = int(env.get("FAKE_CHUNK", "5"))
pause = float(env.get("FAKE_SLEEP", "0.01"))
ckpt_every = int(env.get("FAKE_CKPT_EVERY", "10"))
hang_at = int(env.get("FAKE_HANG_AT", "0"))
crash_trials = {int(t) for t in env.get("FAKE_CRASH_TRIAL", "0").split(",")}
store = env.get("FAKE_STORE") == "1"

session = Session(env["DET_MASTER"], token=env["DET_SESSION_TOKEN"])
context = session.get(f"/trials/{trial_id}/context")
steps = last_ckpt = context["steps_completed"]
x = float(context["hparams"]["x"])


def record(what: str) -> None:
    with open(os.path.join(fake_dir, "events.log"), "a") as f:
        f.write(f"{what} {trial_id} {time.time()}\n")


def checkpoint() -> None:
    global last_ckpt
    if steps > last_ckpt:
        ckpt_id = str(uuid.uuid4())
        resources = {"state": 1}
        if store:
            from determined.storage import build_storage_manager

            with build_storage_manager(context["config"]["checkpoint_storage"]).store_path(ckpt_id) as path:
                (path / "state").write_text(f"trial {trial_id} steps {steps}")
            resources = {"state": len(f"trial {trial_id} steps {steps}")}
        session.post(f"/trials/{trial_id}/checkpoints", {"uuid": ckpt_id, "steps_completed": steps,
                                                         "resources": resources, "framework": "fake", "format": "none"})
        last_ckpt = steps


def preempted() -> bool:
    return bool(session.get(f"/allocations/{allocation_id}/signals/preemption")["preempt"])


def leave(code: int = 0) -> None:
    record("end")
    sys.exit(code)


record("start")
while env.get("FAKE_GATE") and not os.path.exists(env["FAKE_GATE"]) and not preempted():
    time.sleep(0.05)
print(f"fake trial {trial_id} starts at batch {steps}", flush=True)
print("a line on stderr", file=sys.stderr, flush=True)
if int(env.get("FAKE_PRINT_BYTES", "0")):
    big, piece = int(env["FAKE_PRINT_BYTES"]), b"x" * (1 << 20)
    for _ in range(big // len(piece)):
        sys.stdout.buffer.write(piece)
    sys.stdout.buffer.write(b"x" * (big % len(piece)) + b"\nafter the long line\n")
    sys.stdout.flush()
for i in range(int(env.get("FAKE_PRINT_LINES", "0"))):
    print(f"line {i} " + "y" * 100)
sys.stdout.flush()
while True:
    if preempted():
        checkpoint()
        leave()
    op = session.get(f"/trials/{trial_id}/searcher/operation")
    if op.get("completed"):
        leave()
    if op.get("wait"):
        time.sleep(0.05)
        continue
    target = op["length"]
    while steps < target:
        steps = min(steps + chunk, target)
        time.sleep(pause)
        session.post(f"/trials/{trial_id}/training_metrics", {"steps_completed": steps, "metrics": {"loss": x + 1 / steps}})
        if trial_id in crash_trials:
            os._exit(3)
        marker = os.path.join(fake_dir, f"hung-{trial_id}")
        if hang_at and steps >= hang_at and not os.path.exists(marker):
            open(marker, "w").close()
            with open(os.path.join(fake_dir, f"pid-{trial_id}"), "w") as f:
                f.write(str(os.getpid()))
            while True:
                time.sleep(1)
        if steps - last_ckpt >= ckpt_every:
            checkpoint()
        if preempted():
            checkpoint()
            leave()
    metric = (x - 0.5) ** 2 + 1 / steps
    session.post(f"/trials/{trial_id}/validation_metrics", {"steps_completed": steps, "metrics": {"loss": metric}})
    checkpoint()
    session.post(f"/trials/{trial_id}/searcher/completed_operation", {"length": target, "metric": metric})
