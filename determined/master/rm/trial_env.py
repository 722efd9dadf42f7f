"""What a trial process starts with: an environment built from an allow-list, and the OS user it runs as.

A trial gets the variables a program needs to run (PATH, locale, temporary dir, Python's own), the ones that
tune its libraries (CUDA, NCCL, OMP, ...), proxies and CA certificates, its own DET_* variables, and the
experiment's `environment.environment_variables` (`determined.config.environment_variables`, passed to `launch`). It never gets the rest of the master's environment: not
DET_DB_URL, not a password or token the master was started with. The variables that carry cloud credentials
(AWS_*, ...) pass only to trials that run as the master's own OS user, which can read the master's files anyway;
trials isolated as another user (`TrialUser`) get credentials only from their experiment's config.

This module imports only the standard library: the Ray worker uses it on every node.
"""
import dataclasses
import grp
import os
import pwd
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

# Exact names passed from the master's (or Ray worker's) environment.
PASSED_NAMES = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP", "TERM", "LD_LIBRARY_PATH", "VIRTUAL_ENV",
    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy", "all_proxy",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
    # knobs of the trial side of this platform
    "DET_COLLECTIVE_TIMEOUT_S",
})
# Prefixes passed: locale, Python, accelerators and the numeric libraries' threading.
PASSED_PREFIXES: Tuple[str, ...] = (
    "LC_", "PYTHON", "CUDA_", "NCCL_", "NVIDIA_", "OMP_", "MKL_", "OPENBLAS_", "KMP_", "GLOO_", "TORCH_", "TF_",
    "XLA_", "HOROVOD_",
)
# Credentials of cloud storage: only for trials that run as the master's own OS user.
CREDENTIAL_PREFIXES: Tuple[str, ...] = ("AWS_", "GOOGLE_APPLICATION_CREDENTIALS", "AZURE_")


@dataclasses.dataclass(frozen=True)
class TrialUser:
    """The OS user trial processes run as (the master drops privileges for them; it must run as root)."""

    name: str
    uid: int
    gid: int
    groups: Tuple[int, ...]
    home: str

    def popen_kwargs(self) -> Dict[str, Any]:
        """The arguments of subprocess.Popen that start a process as this user (setgroups, setgid, setuid)."""
        return {"user": self.uid, "group": self.gid, "extra_groups": list(self.groups)}


def resolve_trial_user(spec: Union[str, int]) -> TrialUser:
    """The OS user named by `spec` (a name or a numeric uid); raises ValueError naming the fix."""
    try:
        entry = pwd.getpwuid(int(spec)) if isinstance(spec, int) or str(spec).isdigit() else pwd.getpwnam(str(spec))
    except KeyError:
        raise ValueError(f"trial_user {spec!r} is not a user of this machine; create it (e.g. `useradd --system "
                         f"{spec}`) or name an existing one") from None
    if entry.pw_uid == 0:
        raise ValueError(f"trial_user {spec!r} is root: trials would run with every privilege; name an "
                         "unprivileged user")
    groups = tuple(sorted(set(os.getgrouplist(entry.pw_name, entry.pw_gid))))
    return TrialUser(entry.pw_name, entry.pw_uid, entry.pw_gid, groups, entry.pw_dir)


def group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def _passed(name: str, with_credentials: bool) -> bool:
    if name in PASSED_NAMES or name.startswith(PASSED_PREFIXES):
        return True
    return with_credentials and name.startswith(CREDENTIAL_PREFIXES)


# Where the master's own user keeps things: passed to trials that run as that user (the data dir's caches).
_OWN_USER_NAMES = ("HOME", "USER", "LOGNAME", "DET_DATA_DIR", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")


# Variables of the master's own that a trial never inherits, even from an embedded master: the platform sets each
# trial's DET_* variables itself, and the database's URL and password are the master's.
_MASTER_ONLY_PREFIXES = ("DET_",)
_INHERITED_DET_NAMES = frozenset({"DET_DATA_DIR", "DET_COLLECTIVE_TIMEOUT_S"})


def inherited_environment(source: Mapping[str, str]) -> Dict[str, str]:
    """The environment a trial of an embedded master starts from: its user's whole environment (the trials are
    that user's programs on that user's machine, as a script run by hand would be), without the master's own
    DET_* variables."""
    env = {k: v for k, v in source.items()
           if not k.startswith(_MASTER_ONLY_PREFIXES) or k in _INHERITED_DET_NAMES}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def trial_environment(source: Mapping[str, str], *, user: Optional[TrialUser] = None,
                      home: Optional[str] = None) -> Dict[str, str]:
    """The environment a trial process starts from, taken from `source` (the master's or a Ray worker's).

    With `user`, the trial runs as that user: HOME (`home`, else the user's own), USER and LOGNAME are its, and
    no credentials pass. Without, the trial runs as the master's own user: its HOME, USER, DET_DATA_DIR and
    XDG_* directories pass too (the dataset cache in the data dir is shared).
    """
    env = {k: v for k, v in source.items() if _passed(k, with_credentials=user is None)}
    if user is not None:
        env.update({"HOME": home or user.home, "USER": user.name, "LOGNAME": user.name})
    else:
        env.update({k: source[k] for k in _OWN_USER_NAMES if k in source})
    env["PYTHONUNBUFFERED"] = "1"
    return env


__all__: List[str] = ["TrialUser", "resolve_trial_user", "trial_environment", "inherited_environment"]
