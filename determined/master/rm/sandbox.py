"""A sandbox per trial run, made with bubblewrap (`bwrap`), and the OS account the run is started as.

A server that runs as root with a `trial_user` starts each run as its submitting user's linked OS account
(`det user link-with-agent-user`), else as `trial_user`, inside `bwrap` (docs/auth.md, "The sandbox of a trial"):

- its own PID namespace (`--unshare-pid`, `--die-with-parent`): its /proc shows its own processes only, and every
  process it started, a double-forked `setsid` one included, dies with it;
- its own mount namespace, in which the master's data dir (database, lock file, other runs) is an empty tmpfs with
  only the run's own directories bound back (its run directory, its home, its TensorBoard directory); the
  directories of the master's storage roots are empty too, except the experiment's storage directory, where every
  entry the run's account could read but may not (another experiment's checkpoint, or one of the same account's
  other experiments) is covered by an empty tmpfs; the checkpoints the run must read (its warm start, its latest)
  are bound read-only, as a private copy when their files belong to another account;
- a private /tmp and /var/tmp (a directory of the run's, deleted with it) and a private /dev/shm;
- the platform's Python installation (sys.prefix) read-only, so a startup hook's `pip install` cannot change
  what the next user's trial runs;
- `bind_mounts` as in Determined: `host_path` at `container_path` (absolute), `read_only`; nothing is created on
  this machine for a `container_path` that does not exist.

The account is taken inside the sandbox with `setpriv` (bwrap itself runs as root to make the mounts), and the run
starts with umask 077: what it writes (checkpoints, TensorBoard files) belongs to its account and no other user can
read it. This module imports only the standard library.
"""
import dataclasses
import logging
import os
import pathlib
import pwd
import shutil
import stat
import subprocess
import sys
from typing import Any, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from determined.master.rm.trial_env import TrialUser

logger = logging.getLogger("determined.master")

# bind_mounts propagation values Determined accepted; a sandbox's mounts never propagate back to the host.
PROPAGATIONS = ("rprivate", "private", "rslave", "slave", "rshared", "shared")
# The sandbox's own mounts a bind mount may not replace (a path under /tmp is made in the run's private /tmp).
PRIVATE_MOUNTS = ("/tmp", "/var/tmp", "/dev/shm", "/dev")


# The storage directory: sticky, writable and searchable by all, listable by none but root (each account makes its
# own checkpoint directories, 0700, cannot rename or delete another's, and cannot list the uuids of others; the
# storage manager walks to it with O_PATH descriptors, which need search permission only).
STORAGE_DIR_MODE = 0o1733


class SandboxRefused(Exception):
    """The run cannot start as asked (a bind mount that is not allowed): the message names the field and the fix."""


@dataclasses.dataclass(frozen=True)
class RunRequest:
    """What the master asks of one run, read from its database (security/isolation.run_request).

    `account`: the submitting user's link (`agent_uid`, `agent_gid`, `agent_user`, `agent_group`), None for the
    default account. `storage_dir`: the experiment's shared_fs directory (None: not shared_fs).
    `experiment_checkpoints`: the uuids of the experiment's checkpoints there. `needed`: (uuid, directory) of the
    checkpoints the run reads (its warm start and its own latest). `tensorboard_dir`: where it writes its
    TensorBoard event files.
    """

    account: Optional[Mapping[str, Any]] = None
    storage_dir: Optional[str] = None
    experiment_checkpoints: FrozenSet[str] = frozenset()
    needed: Tuple[Tuple[str, str], ...] = ()
    bind_mounts: Tuple[Mapping[str, Any], ...] = ()
    tensorboard_dir: Optional[str] = None


def account_of(link: Optional[Mapping[str, Any]], default: TrialUser) -> TrialUser:
    """The OS account of a run: the user's link (its groups from this machine's databases when the name is known
    here with the same uid), else the default account."""
    if not link:
        return default
    uid, gid, name = int(link["agent_uid"]), int(link["agent_gid"]), str(link["agent_user"])
    groups: Tuple[int, ...] = (gid,)
    home = ""
    try:
        entry = pwd.getpwnam(name)
        if entry.pw_uid == uid:
            groups = tuple(sorted(set(os.getgrouplist(name, gid))))
            home = entry.pw_dir
    except KeyError:
        pass
    return TrialUser(name, uid, gid, groups, home)


def sandbox_problem() -> Optional[str]:
    """Why no sandbox can be made on this machine (None: it can): bwrap and setpriv are needed, and bwrap must be
    able to make the namespaces."""
    if os.geteuid() != 0:
        return "the master does not run as root"
    bwrap, setpriv = shutil.which("bwrap"), shutil.which("setpriv")
    if bwrap is None:
        return "bubblewrap is not installed (`apt-get install bubblewrap`)"
    if setpriv is None:
        return "setpriv (util-linux) is not installed"
    try:
        probe = subprocess.run([bwrap, "--die-with-parent", "--unshare-pid", "--dev-bind", "/", "/", "--proc", "/proc",
                                "--tmpfs", "/tmp", "true"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                               timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"bwrap cannot run: {e}"
    if probe.returncode != 0:
        return f"bwrap cannot make a mount and PID namespace here: {(probe.stderr.strip() or 'no message')[-300:]}"
    return None


def _inside(path: str, root: str) -> bool:
    return os.path.commonpath([path, root]) == root


def readable_by(st: os.stat_result, account: TrialUser) -> bool:
    """Whether `account` may read (and enter) a file or directory with this stat."""
    if st.st_uid == account.uid:
        bits = 0o500
    elif st.st_gid in account.groups or st.st_gid == account.gid:
        bits = 0o050
    else:
        bits = 0o005
    need = bits if stat.S_ISDIR(st.st_mode) else bits & 0o444
    return st.st_mode & need == need


class Sandbox:
    """Builds the bwrap command line of a run (see the module).

    `data_dir`: the master's; `hidden`: more paths that must not exist in a run (a SQLite database outside the data
    dir: its directory is hidden); `storage_roots`: the master's checkpoint storage roots.
    """

    def __init__(self, data_dir: str, *, storage_roots: Sequence[str] = (), hidden: Sequence[str] = ()) -> None:
        self.bwrap = shutil.which("bwrap") or "bwrap"
        self.setpriv = shutil.which("setpriv") or "setpriv"
        self.data_dir = os.path.realpath(data_dir)
        self.storage_roots = [os.path.realpath(r) for r in storage_roots]
        self.hidden = [os.path.realpath(h) for h in hidden]
        # the Python installation, and this package's own directory (outside it in an editable install)
        package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # determined/master
        package = os.path.dirname(package)  # determined
        self.platform = sorted({os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, package)})

    def check_bind_mounts(self, mounts: Sequence[Mapping[str, Any]], run_dir: str) -> List[Tuple[str, str, bool]]:
        """(host path, path in the sandbox, read only) of each bind mount; SandboxRefused names a bad one."""
        result = []
        for i, mount in enumerate(mounts):
            where = f"bind_mounts[{i}]"
            host, inside = mount.get("host_path"), mount.get("container_path")
            if not isinstance(host, str) or not os.path.isabs(host):
                raise SandboxRefused(f"{where}.host_path: {host!r} must be an absolute path on this machine")
            if not isinstance(inside, str) or not inside or inside.strip("/") in ("", "."):
                raise SandboxRefused(f"{where}.container_path: {inside!r} must name a directory other than / and .")
            if not os.path.isabs(inside):
                raise SandboxRefused(f"{where}.container_path: {inside!r} is relative; here a trial's model directory "
                                     "is made as it starts, so give an absolute path (e.g. /mnt/data)")
            real = os.path.realpath(host)
            if not os.path.exists(real):
                raise SandboxRefused(f"{where}.host_path: {host} does not exist on this machine; create it first")
            for private in [self.data_dir, *self.storage_roots, *self.hidden]:
                if _inside(real, private) or _inside(private, real):
                    raise SandboxRefused(
                        f"{where}.host_path: {host} is or holds the master's data dir or a checkpoint storage root "
                        f"({private}); trials reach checkpoints through checkpoint_storage: bind another directory")
            target = os.path.normpath(inside)
            if _inside(run_dir, target) or target in ("/proc", "/dev") or _inside(target, "/proc"):
                raise SandboxRefused(f"{where}.container_path: {inside} would cover the trial's own directory or "
                                     "/proc; choose another path")
            if target in PRIVATE_MOUNTS:
                raise SandboxRefused(f"{where}.container_path: {inside} is the run's private {target} (made for each "
                                     f"run and deleted with it); mount at a path under it or elsewhere, e.g. /mnt/data")
            for prefix in self.platform:  # bound read-only last: a mount over or inside it would be covered or lost
                if _inside(target, prefix) or _inside(prefix, target):
                    raise SandboxRefused(f"{where}.container_path: {inside} would cover or sit inside the platform's "
                                         f"Python installation ({prefix}), which every run uses read-only; choose "
                                         "another path, e.g. /mnt/data")
            propagation = mount.get("propagation") or "rprivate"
            if propagation not in PROPAGATIONS:
                raise SandboxRefused(f"{where}.propagation: {propagation!r} is not one of {', '.join(PROPAGATIONS)}")
            result.append((real, target, bool(mount.get("read_only"))))
        return result

    def argv(self, command: Sequence[str], *, run_dir: str, home: str, account: TrialUser,
             request: RunRequest, cwd: str = "") -> List[str]:
        """bwrap's command line that runs `command` as `account` in the sandbox of the run in `run_dir`, in the
        directory `cwd` (a task's `work_dir`; default: `run_dir`)."""
        mounts = self.check_bind_mounts(request.bind_mounts, run_dir)
        tmp = os.path.join(run_dir, ".tmp")
        _private_dir(tmp, account)
        self._emptied = [self.data_dir, *[r for r in self.storage_roots if not _inside(r, self.data_dir)]]
        args = [self.bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", *_rebuilt("/", "--dev-bind"),
                "--proc", "/proc", "--tmpfs", "/dev/shm", "--setenv", "DET_SANDBOXED", "1"]  # config/effects.py
        for _host, target, _read_only in mounts:
            args += self._mount_point(target, run_dir)
        args += ["--bind", tmp, "/tmp", "--bind", tmp, "/var/tmp"]
        for hidden in self.hidden:
            if os.path.exists(hidden) and not _inside(hidden, self.data_dir):
                folder = os.path.dirname(hidden) if os.path.isfile(hidden) else hidden
                if any(_inside(p, folder) for p in [run_dir, *self.platform]) or folder == "/":
                    args += ["--ro-bind", "/dev/null", hidden]  # its directory holds what the run needs
                else:
                    args += ["--tmpfs", folder]
        if os.path.isdir(self.data_dir):  # (a Ray node may not have the master's data dir)
            args += ["--perms", "0755", "--tmpfs", self.data_dir]
        for root in self._emptied[1:]:
            if os.path.isdir(root):
                args += ["--perms", "0755", "--tmpfs", root]
        args += [*self._reach(run_dir), "--bind", run_dir, run_dir]
        if home and _inside(home, self.data_dir):
            args += [*self._reach(home), "--bind", home, home]
        if request.tensorboard_dir:
            args += [*self._reach(request.tensorboard_dir), "--bind", request.tensorboard_dir, request.tensorboard_dir]
        args += self._storage_args(request, run_dir, account)
        for host, target, read_only in mounts:
            ancestors = pathlib.PurePath(target).parents
            for above in reversed([str(a) for a in ancestors if str(a) != "/"]):
                args += ["--perms", "0755", "--dir", above]  # made (passable) only where missing
            args += ["--ro-bind" if read_only else "--bind", host, target]
        for prefix in self.platform:  # last: nothing above may make the platform's installation writable
            if any(_inside(prefix, private) for private in ("/tmp", "/var/tmp")):
                # under the run's private /tmp: its mount point's directories are made there, passable (bwrap makes
                # them with the run's umask, 077, which would keep the account from its own Python)
                for above in reversed([str(a) for a in pathlib.PurePath(prefix).parents if str(a) not in ("/", "/tmp",
                                                                                                      "/var", "/var/tmp")]):
                    args += ["--perms", "0755", "--dir", above]
            args += ["--ro-bind", prefix, prefix]
        args += ["--chdir", cwd or run_dir, "--", self.setpriv, f"--reuid={account.uid}", f"--regid={account.gid}"]
        extra = [g for g in account.groups if g != account.gid]
        args += [f"--groups={','.join(map(str, extra))}"] if extra else ["--clear-groups"]
        # umask 077 from here on (bwrap made its mount points with 022, so the account can pass through them)
        return args + ["--inh-caps=-all", "--", "/bin/sh", "-c", 'umask 077 && exec "$@"', "sh", *command]

    def _mount_point(self, target: str, run_dir: str) -> List[str]:
        """What makes room for a bind mount at `target` without creating anything on this machine: a directory that
        does not exist is made in a tmpfs, where the run's own directories, an emptied directory or the root (the
        sandbox's root is bwrap's tmpfs with this machine's top-level entries bound in) hold it; elsewhere its nearest
        existing directory is rebuilt the same way (a tmpfs with that directory's entries bound in)."""
        if os.path.lexists(target):
            return []
        for place in ("/tmp", "/var/tmp", run_dir, *self._emptied):
            if _inside(target, place):
                return []
        nearest = os.path.dirname(target)
        while not os.path.isdir(nearest):
            nearest = os.path.dirname(nearest)
        return [] if nearest == "/" else ["--perms", "0755", "--tmpfs", nearest, *_rebuilt(nearest, "--bind")]

    def _reach(self, path: str) -> List[str]:
        """The directories between an emptied directory (a tmpfs) and `path`, made readable (0755) for the account
        (bwrap would make them 0700, root's): they hold only what the sandbox binds there, and the storage manager
        opens every directory on its way (O_RDONLY) to refuse links."""
        for emptied in self._emptied:
            if _inside(path, emptied) and path != emptied:
                parts = pathlib.PurePath(os.path.relpath(path, emptied)).parts[:-1]
                args: List[str] = []
                for i in range(len(parts)):
                    args += ["--perms", "0755", "--dir", os.path.join(emptied, *parts[:i + 1])]
                return args
        return []

    def _storage_args(self, request: RunRequest, run_dir: str, account: TrialUser) -> List[str]:
        """The experiment's storage directory with what the account may not read covered, and the checkpoints the
        run needs bound read-only (copied for the account when their files are another's)."""
        args: List[str] = []
        needed = {uuid for uuid, _ in request.needed}
        storage = os.path.realpath(request.storage_dir) if request.storage_dir else None
        if storage is not None and any(_inside(storage, r) for r in self.storage_roots):
            prepare_storage_dir(storage)
            args += [*self._reach(storage), "--bind", storage, storage]
            with os.scandir(storage) as entries:
                for entry in entries:
                    allowed = entry.name in request.experiment_checkpoints or entry.name in needed
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if allowed or stat.S_ISLNK(st.st_mode) or not readable_by(st, account):
                        continue  # what the account cannot read stays as it is: the kernel refuses it
                    cover = ["--tmpfs"] if stat.S_ISDIR(st.st_mode) else ["--ro-bind", "/dev/null"]
                    args += [*cover, entry.path]
        for uuid, directory in request.needed:
            path = os.path.realpath(directory)
            if not os.path.isdir(path) or os.path.islink(directory) or not any(
                    _inside(path, r) for r in self.storage_roots):
                continue  # not in storage (the run says so itself), or not this master's storage
            source = path
            if not _tree_readable(path, account):
                source = os.path.join(run_dir, ".checkpoints", uuid)
                copy_for(path, source, account)
            args += [*self._reach(path), "--ro-bind", source, path]
        return args


def _rebuilt(directory: str, bind: str) -> List[str]:
    """bwrap's arguments that put every entry of `directory` back at its place (links as links), over a tmpfs."""
    args: List[str] = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        if directory == "/" and name == "proc":
            continue  # the sandbox's own, mounted after
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        else:
            args += [bind, path, path]
    return args


def prepare_storage_dir(path: str) -> None:
    """The storage directory of sandboxed runs: root's, mode STORAGE_DIR_MODE (every account creates its checkpoints
    in it, none renames or deletes another's entry). A directory root does not own is left as it is."""
    if not os.path.isdir(path):
        os.makedirs(path, mode=0o755, exist_ok=True)
        os.chown(path, 0, 0)
    st = os.stat(path)
    if st.st_uid == 0 and stat.S_IMODE(st.st_mode) != STORAGE_DIR_MODE:
        os.chmod(path, STORAGE_DIR_MODE)


def _private_dir(path: str, account: TrialUser) -> None:
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chown(path, account.uid, account.gid)
    os.chmod(path, 0o700)


def _tree_readable(path: str, account: TrialUser) -> bool:
    for dirpath, dirnames, filenames in os.walk(path):
        for name in [*dirnames, *filenames]:
            st = os.lstat(os.path.join(dirpath, name))
            if not stat.S_ISLNK(st.st_mode) and not readable_by(st, account):
                return False
    return readable_by(os.stat(path), account)


def copy_for(source: str, target: str, account: TrialUser) -> None:
    """A private copy of a checkpoint for `account` (links copied as links, never followed)."""
    if os.path.exists(target):
        shutil.rmtree(target)
    os.makedirs(os.path.dirname(target), mode=0o700, exist_ok=True)
    shutil.copytree(source, target, symlinks=True)
    for dirpath, dirnames, filenames in os.walk(target):
        os.chown(dirpath, account.uid, account.gid, follow_symlinks=False)
        for name in [*dirnames, *filenames]:
            os.chown(os.path.join(dirpath, name), account.uid, account.gid, follow_symlinks=False)
    os.chown(os.path.dirname(target), account.uid, account.gid)


def prepare_tensorboard_dir(path: str, account: TrialUser) -> None:
    """`<data dir>/tensorboard/experiment_<E>/trial_<T>`: the experiment's directory root's (0711), the trial's the
    account's (0700); the master reads both as root."""
    parent = os.path.dirname(path)
    os.makedirs(parent, mode=0o711, exist_ok=True)
    if os.stat(parent).st_uid == 0:
        os.chmod(parent, 0o711)
    os.makedirs(path, mode=0o700, exist_ok=True)
    os.chown(path, account.uid, account.gid)
    os.chmod(path, 0o700)


def describe_problem(problem: str) -> str:
    """The notice a server logs at start when runs cannot be sandboxed."""
    return (f"TRIALS ARE NOT SANDBOXED: {problem}. Trials still run as their user's OS account (or trial_user), but "
            "they share /tmp and /proc with every other trial (a trial of one account can see the processes of "
            "another), their setsid children may outlive them, bind_mounts have no effect, the platform's Python is "
            "as writable as its files' permissions allow, and a trial of one account can read the checkpoints of "
            "another experiment of the same account; install bubblewrap (see docs/auth.md)")


__all__: List[str] = ["RunRequest", "Sandbox", "SandboxRefused", "account_of", "sandbox_problem", "readable_by",
                      "prepare_storage_dir", "prepare_tensorboard_dir", "copy_for", "describe_problem"]
