"""Keeping trial processes away from the master's own files (server mode; see docs/auth.md, threat model).

With a trial user (master config `trial_user`), the master runs as root and starts every trial process as that
user (rm/trial_env.py). At start it makes the data dir unreadable to that user: the data dir is 0711 (others
may pass through it to the two directories trials use, but not list it), and everything in it is private to
the master (0600 files, 0700 directories: the database and its journal, the lock file, TensorBoard state),
except `checkpoints/` (root's, mode 1733: every account creates its checkpoints in it, none lists, renames or
deletes another's), `tensorboard/` (root's, 0711: the master makes each trial's directory, owned by the trial's account) and
`work/` (0711; each run's directory is owned by the run's account). A user linked with an OS account
(`det user link-with-agent-user`) has their trials run as that account, the others as the trial user; `run_request`
reads from the database what a run's sandbox shows (rm/sandbox.py). Without a trial user, trials run as the master's
own OS user and can read and change its database: the master says so at start.
"""
import os
import pathlib
import stat
import subprocess
import sys
from typing import List, Optional

from sqlalchemy import select
from sqlalchemy.orm import Session

from determined import errors
from determined.common.tfevents import trial_dir
from determined.master.db import Checkpoint, Experiment, Trial, User
from determined.master.rm.sandbox import STORAGE_DIR_MODE, RunRequest
from determined.master.rm.trial_env import TrialUser, group_name
from determined.master.security.users import agent_user_group
from determined.storage import shared_fs_path

# Entries of the data dir that trials use; everything else in it is the master's alone.
TRIAL_DIRS = ("checkpoints", "tensorboard", "work")


def protect_data_dir(data_dir: pathlib.Path, user: TrialUser) -> None:
    """Set the owners and modes above; raises DeterminedError naming the fix when trials could not work."""
    if os.geteuid() != 0:
        raise errors.DeterminedError(
            f"running trials as {user.name!r} (trial_user) needs the master to run as root, which starts each trial "
            f"process as that user; start the master as root, or remove trial_user")
    _check_reachable(data_dir, user)
    os.chmod(data_dir, 0o711)
    for entry in os.scandir(data_dir):
        if entry.name in TRIAL_DIRS:
            continue
        _make_private(pathlib.Path(entry.path))
    (data_dir / "checkpoints").mkdir(exist_ok=True)
    os.chown(data_dir / "checkpoints", 0, 0)
    os.chmod(data_dir / "checkpoints", STORAGE_DIR_MODE)
    tensorboard = data_dir / "tensorboard"
    tensorboard.mkdir(exist_ok=True)
    os.chown(tensorboard, 0, 0)
    os.chmod(tensorboard, 0o711)
    work = data_dir / "work"
    work.mkdir(exist_ok=True)
    os.chown(work, 0, 0)
    os.chmod(work, 0o711)
    check_trial_user_runs_python(user, work)


def check_trial_user_runs_python(user: TrialUser, cwd: pathlib.Path) -> None:
    """Start this Python as the trial user and import this package: a clear error now, not failing trials later."""
    try:
        probe = subprocess.run([sys.executable, "-c", "import determined.exec.harness"], cwd=str(cwd),
                               env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=120, **user.popen_kwargs())
        problem = "" if probe.returncode == 0 else (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[-1]
    except OSError as e:
        problem = f"{e.strerror or e}"
    if problem:
        raise errors.DeterminedError(
            f"trials run as {user.name!r} (trial_user) cannot start {sys.executable} with this package: {problem}; "
            "install Python and determined where every user can read them (not in root's home directory), or "
            "remove trial_user")


def _make_private(path: pathlib.Path) -> None:
    """The master's own file or directory tree: 0600 files, 0700 directories (links are left alone)."""
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        return
    if stat.S_ISDIR(st.st_mode):
        os.chmod(path, 0o700)
        for dirpath, dirnames, filenames in os.walk(path):
            for name in dirnames:
                if not os.path.islink(os.path.join(dirpath, name)):
                    os.chmod(os.path.join(dirpath, name), 0o700)
            for name in filenames:
                if not os.path.islink(os.path.join(dirpath, name)):
                    os.chmod(os.path.join(dirpath, name), 0o600)
    else:
        os.chmod(path, 0o600)


def _check_reachable(data_dir: pathlib.Path, user: TrialUser) -> None:
    """Every directory above the data dir must let others pass through, or trials cannot reach their run dirs."""
    for parent in reversed(data_dir.parents):
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            raise errors.DeterminedError(
                f"trials run as {user.name!r} cannot reach the data dir {data_dir}: {parent} does not let other users "
                f"pass through it (mode {stat.filemode(mode)}); put the data dir elsewhere (e.g. /var/lib/determined) "
                f"or run `chmod o+x {parent}`")


def isolation_warning(trial_user: Optional[TrialUser], data_dir: pathlib.Path, db_file: Optional[str]) -> Optional[str]:
    """The warning a server logs at start when its trials are not isolated from it (None when they are)."""
    if trial_user is not None:
        return None
    whom = "root" if os.geteuid() == 0 else f"user {os.geteuid()}"
    target = f"its database {db_file}" if db_file else f"its data dir {data_dir}"
    fix = ("set trial_user in the master config (or --trial-user NAME) to run them as an unprivileged OS user"
           if os.geteuid() == 0 else
           "run the master as root with trial_user set (or --trial-user NAME) to run them as an unprivileged OS user")
    return (f"TRIALS ARE NOT ISOLATED: they run as this master's own OS user ({whom}) and can read and change "
            f"{target} (users, tokens, every experiment), without a sandbox, and users' links with OS accounts "
            f"(det user link-with-agent-user) are not used; {fix}; see docs/auth.md")


def run_request(s: Session, exp: Experiment, trial: Trial, data_dir: pathlib.Path) -> RunRequest:
    """What a run of `trial` runs as and what its sandbox shows: the experiment owner's linked OS account, the
    experiment's shared_fs directory and checkpoints, the checkpoints the run reads (its warm start, its own latest),
    its bind_mounts and its TensorBoard directory."""
    owner = s.get(User, exp.owner_id) if exp.owner_id is not None else None
    if owner is None:
        owner = s.scalars(select(User).where(User.username == exp.owner)).first()
    storage_dir = _shared_fs_dir(exp)
    own = frozenset(s.scalars(select(Checkpoint.uuid).where(Checkpoint.experiment_id == exp.id)))
    latest = s.scalars(select(Checkpoint.uuid).where(Checkpoint.trial_id == trial.id, Checkpoint.state == "COMPLETED")
                       .order_by(Checkpoint.steps_completed.desc(), Checkpoint.id.desc()).limit(1)).first()
    needed = []
    for uuid in dict.fromkeys(u for u in (trial.warm_start_checkpoint_uuid, latest) if u):
        checkpoint = s.scalars(select(Checkpoint).where(Checkpoint.uuid == uuid)).first()
        source = s.get(Experiment, checkpoint.experiment_id) if checkpoint is not None else None
        directory = _shared_fs_dir(source) if source is not None else None
        if directory is not None:
            needed.append((uuid, os.path.join(directory, uuid)))
    mounts = exp.config.get("bind_mounts") or []
    return RunRequest(account=agent_user_group(owner) if owner is not None else None, storage_dir=storage_dir,
                      experiment_checkpoints=own, needed=tuple(needed),
                      bind_mounts=tuple(m for m in mounts if isinstance(m, dict)),
                      tensorboard_dir=str(trial_dir(data_dir / "tensorboard", exp.id, trial.id)))


def _shared_fs_dir(exp: Experiment) -> Optional[str]:
    storage = exp.config.get("checkpoint_storage") or {}
    if not isinstance(storage, dict) or storage.get("type") != "shared_fs":
        return None
    try:
        return str(shared_fs_path(storage))
    except errors.DeterminedError:
        return None


def describe(user: TrialUser) -> str:
    return f"{user.name} (uid {user.uid}, gid {user.gid} {group_name(user.gid)})"


__all__: List[str] = ["protect_data_dir", "isolation_warning", "describe", "run_request"]
