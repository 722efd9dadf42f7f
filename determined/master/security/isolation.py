"""Keeping trial processes away from the master's own files (server mode; see docs/auth.md, threat model).

With a trial user (master config `trial_user`), the master runs as root and starts every trial process as that
user (rm/trial_env.py). At start it makes the data dir unreadable to that user: the data dir is 0711 (others
may pass through it to the two directories trials use, but not list it), and everything in it is private to
the master (0600 files, 0700 directories: the database and its journal, the lock file, TensorBoard state),
except `checkpoints/` and `tensorboard/` (owned by the trial user: trials write their checkpoints and
TensorBoard event files there) and `work/` (0711; each run's directory is owned by the trial user). Without a trial user, trials run as the master's own OS user and
can read and change its database: the master says so at start.
"""
import os
import pathlib
import stat
import subprocess
import sys
from typing import List, Optional

from determined import errors
from determined.master.rm.trial_env import TrialUser, group_name

# Entries of the data dir that trials use; everything else in it is the master's alone.
TRIAL_DIRS = ("checkpoints", "tensorboard", "work")
# Of those, the ones trials write into directly (their TensorBoard event files, their checkpoints).
TRIAL_OWNED_DIRS = ("checkpoints", "tensorboard")


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
    for name in TRIAL_OWNED_DIRS:
        owned = data_dir / name
        owned.mkdir(exist_ok=True)
        os.chown(owned, user.uid, user.gid)
        os.chmod(owned, 0o755)
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
            f"{target} (users, tokens, every experiment); {fix}; see docs/auth.md")


def describe(user: TrialUser) -> str:
    return f"{user.name} (uid {user.uid}, gid {user.gid} {group_name(user.gid)})"


__all__: List[str] = ["protect_data_dir", "isolation_warning", "describe"]
