"""`det master up`: the master as a long-running server (REST API, scheduler) in the foreground."""
import argparse
import os
import pathlib
import sys
from typing import Any, Dict, List

from determined import common, errors

DEFAULT_PORT = 8080
_CONFIG_KEYS = ("host", "port", "db", "data_dir", "cpu_slots", "preemption_timeout", "resource_manager", "ray_address",
                "ray_slot_type", "ray_cpus_per_slot", "allowed_hosts", "checkpoint_storage_roots", "trial_user",
                "log_line_max_bytes", "trial_log_max_bytes", "checkpoint_storage_endpoints", "resource_pools")
# Config-file keys of interactive tasks (determined/master/tasks/): seconds of idleness before a notebook (null: never,
# Determined's default) or a TensorBoard (300) is killed.
_CONFIG_KEYS += ("notebook_timeout", "tensorboard_timeout")


def _load_config_file(path: str) -> Dict[str, Any]:
    from determined import config as det_config

    try:
        text = det_config.read_config_file(path, header="cannot read the master config")
        raw = det_config.parse_yaml(text, path, header="cannot read the master config")
    except det_config.ConfigFileError as e:
        raise errors.DeterminedError(str(e)) from None
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise errors.DeterminedError(f"the master config {path} must be a mapping of {', '.join(_CONFIG_KEYS)}")
    unknown = sorted(set(raw) - set(_CONFIG_KEYS))
    if unknown:
        raise errors.DeterminedError(f"the master config {path} has unknown keys {', '.join(map(str, unknown))}; "
                                     f"allowed: {', '.join(_CONFIG_KEYS)}")
    return raw


def _settings(args: argparse.Namespace) -> Dict[str, Any]:
    """Command-line options over the config file over the defaults."""
    settings: Dict[str, Any] = {"host": "127.0.0.1", "port": DEFAULT_PORT, "db": None, "data_dir": None,
                                "cpu_slots": None, "preemption_timeout": None, "resource_manager": "local",
                                "ray_address": None, "ray_slot_type": None, "ray_cpus_per_slot": None,
                                "allowed_hosts": None, "checkpoint_storage_roots": None, "trial_user": None,
                                "log_line_max_bytes": None, "trial_log_max_bytes": None,
                                "checkpoint_storage_endpoints": None, "resource_pools": None}
    if args.config:
        settings.update(_load_config_file(args.config))
        section = settings["resource_manager"]
        if isinstance(section, dict):  # Determined's form: {type, scheduler, default pools, priority_limit}
            kind = section.get("type", "local")
            settings["resource_manager"] = "local" if kind == "agent" else kind
            settings["resource_manager_section"] = section
    for key in _CONFIG_KEYS:
        value = getattr(args, key, None)
        if value is not None:
            settings[key] = value
    for key in ("port", "cpu_slots", "log_line_max_bytes", "trial_log_max_bytes"):
        value = settings[key]
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise errors.DeterminedError(f"{key.replace('_', '-')}: expected an integer, got {value!r}")
    if not 0 <= settings["port"] <= 65535:
        raise errors.DeterminedError(f"--port must be between 0 and 65535, not {settings['port']}")
    if settings["cpu_slots"] is not None and settings["cpu_slots"] < 1:
        raise errors.DeterminedError(f"--cpu-slots must be a positive number of slots, not {settings['cpu_slots']}")
    timeout = settings["preemption_timeout"]
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0):
        raise errors.DeterminedError(f"--preemption-timeout must be a positive number of seconds, not {timeout!r}")
    _resource_manager_section(settings)
    _check_ray_settings(settings)
    for key in ("notebook_timeout", "tensorboard_timeout"):
        value = settings.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
            raise errors.DeterminedError(f"{key}: expected a positive number of seconds (or null), got {value!r}")
    from determined.master.security.web_security import check_allowed_hosts_setting

    try:
        settings["allowed_hosts"] = check_allowed_hosts_setting(settings["allowed_hosts"])
    except ValueError as e:
        raise errors.DeterminedError(str(e)) from None
    _check_server_settings(settings)
    return settings


def _check_server_settings(settings: Dict[str, Any]) -> None:
    roots = settings["checkpoint_storage_roots"]
    if roots is not None and (not isinstance(roots, list) or not all(isinstance(r, str) and r for r in roots)):
        raise errors.DeterminedError(f"checkpoint_storage_roots: expected a list of absolute directories, not {roots!r}")
    endpoints = settings["checkpoint_storage_endpoints"]
    if endpoints is not None:
        from determined.master.storage.storage_endpoints import resolve_endpoints

        if not isinstance(endpoints, list):
            raise errors.DeterminedError(f"checkpoint_storage_endpoints: expected a list of URLs such as "
                                         f"http://minio.internal:9000, not {endpoints!r}")
        resolve_endpoints(endpoints)
    user = settings["trial_user"]
    if user is not None and (isinstance(user, bool) or not isinstance(user, (str, int)) or user == ""):
        raise errors.DeterminedError(f"trial_user: expected an OS user name or uid, not {user!r}")


def _log_limits(settings: Dict[str, Any]) -> Any:
    from determined.master.lifecycle.logs import LogLimits

    given = {k: settings[s] for k, s in (("line_bytes", "log_line_max_bytes"), ("trial_bytes", "trial_log_max_bytes"))
             if settings[s] is not None}
    try:
        return LogLimits(**given)
    except ValueError as e:
        raise errors.DeterminedError(str(e)) from None


def _trial_user(settings: Dict[str, Any]) -> Any:
    if settings["trial_user"] is None:
        return None
    from determined.master.rm.trial_env import resolve_trial_user

    try:
        return resolve_trial_user(settings["trial_user"])
    except ValueError as e:
        raise errors.DeterminedError(str(e)) from None


def _resource_manager_section(settings: Dict[str, Any]) -> None:
    """Determined's master config gives `resource_manager` as a mapping (`type`, `scheduler`, the default pools,
    `priority_limit`) beside `resource_pools`; here `type` is local (Determined's `agent`: this machine's slots) or
    ray. The mapping and the pools become `settings["pools"]` (scheduling/pools.py), refused with the field named."""
    section = settings.pop("resource_manager_section", None)
    from determined.master.scheduling import pools

    try:
        settings["pools"] = pools.parse(section, settings["resource_pools"])
    except pools.PoolConfigError as e:
        raise errors.DeterminedError(f"the master config: {e}") from None


def _check_ray_settings(settings: Dict[str, Any]) -> None:
    kind = settings["resource_manager"]
    if kind not in ("local", "ray"):
        raise errors.DeterminedError(f"--resource-manager: expected local or ray, not {kind!r}")
    ray_options = [k for k in ("ray_address", "ray_slot_type", "ray_cpus_per_slot") if settings[k] is not None]
    if kind == "local" and ray_options:
        raise errors.DeterminedError(f"{', '.join('--' + k.replace('_', '-') for k in ray_options)} need(s) "
                                     "--resource-manager ray")
    if kind == "ray" and settings["cpu_slots"] is not None:
        raise errors.DeterminedError("--cpu-slots is for the local resource manager; with --resource-manager ray "
                                     "the slots are the Ray cluster's (see --ray-slot-type, --ray-cpus-per-slot)")
    if settings["ray_slot_type"] not in (None, "cpu", "gpu"):
        raise errors.DeterminedError(f"--ray-slot-type: expected cpu or gpu, not {settings['ray_slot_type']!r}")
    cpus = settings["ray_cpus_per_slot"]
    if cpus is not None and (isinstance(cpus, bool) or not isinstance(cpus, (int, float)) or cpus <= 0):
        raise errors.DeterminedError(f"--ray-cpus-per-slot must be a positive number of CPUs, not {cpus!r}")
    if settings["ray_address"] is not None and not isinstance(settings["ray_address"], str):
        raise errors.DeterminedError(f"ray_address: expected HOST:PORT, not {settings['ray_address']!r}")


def _ray_resource_manager(settings: Dict[str, Any], data_dir: pathlib.Path) -> Any:
    """Connect to the Ray cluster (a clear error when it cannot) and return the master's RM factory."""
    from determined.master.rm import ray as ray_rm

    address = ray_rm.connect(settings["ray_address"], ray_rm.namespace_for(data_dir))
    trial_host = ray_rm.trial_master_host(str(settings["host"]))
    print(f"Connected to the Ray cluster at {address}", flush=True)
    return ray_rm.make_factory(slot_type=settings["ray_slot_type"], cpus_per_slot=settings["ray_cpus_per_slot"] or 1,
                               trial_host=trial_host)


def _printable_db(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def _db_password_out_of_argv(args: argparse.Namespace) -> None:
    """A database URL with a password on the command line is readable by every local user (`ps`,
    /proc/PID/cmdline), trial processes included: run again with it in DET_DB_URL instead, which only this
    OS user (and root) can read. Same process id, same options."""
    db = getattr(args, "db", None)
    if not db or os.environ.get(_ARGV_CLEANED):
        return
    from sqlalchemy.engine import make_url

    try:
        if not make_url(db).password:
            return
    except Exception:  # not a URL: the normal checks explain it
        return
    argv: List[str] = []
    skip = False
    for arg in sys.orig_argv:
        if skip:
            skip = False
        elif arg == "--db":
            skip = True
        elif not arg.startswith("--db="):
            argv.append(arg)
    if len(argv) == len(sys.orig_argv):  # given in a form not recognised here: leave it
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, {**os.environ, "DET_DB_URL": db, _ARGV_CLEANED: "1"})


_ARGV_CLEANED = "DET_MASTER_ARGV_CLEANED"


def up(args: argparse.Namespace) -> int:
    """Serve until SIGINT or SIGTERM; then running trials checkpoint and stop, and the next `up` resumes them."""
    import logging  # here, not at the top: every `det` command imports this module to build its parser
    import signal
    import threading

    _db_password_out_of_argv(args)
    settings = _settings(args)
    from determined.master import embedded
    from determined.master.db import engine as db_engine
    from determined.master.rm.slots import detect_slots

    data_dir = (common.data_dir() if settings["data_dir"] is None
                else pathlib.Path(str(settings["data_dir"])).expanduser().resolve())
    try:
        db_url = db_engine.resolve_db_url(data_dir, settings["db"])
        slots = detect_slots(settings["cpu_slots"]) if settings["cpu_slots"] is not None else None
    except ValueError as e:
        raise errors.DeterminedError(str(e)) from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    from determined.master.storage import storage_roots as roots_mod

    storage_roots = settings["checkpoint_storage_roots"] or roots_mod.default_roots(data_dir)
    trial_user = _trial_user(settings)
    log_limits = _log_limits(settings)
    resource_manager = _ray_resource_manager(settings, data_dir) if settings["resource_manager"] == "ray" else None

    stop_requested = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop_requested.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            master = embedded.start(data_dir, db_url=db_url, slots=slots, host=settings["host"], port=settings["port"],
                                    preemption_timeout=settings["preemption_timeout"], warn_blank_passwords=True,
                                    resource_manager=resource_manager, allowed_hosts=settings["allowed_hosts"],
                                    storage_roots=storage_roots, trial_user=trial_user, log_limits=log_limits,
                                    storage_endpoints=settings["checkpoint_storage_endpoints"],
                                    resource_pools=settings["pools"])
        except Exception as e:  # the database cannot be reached, and the like: a clear line, not a traceback
            if isinstance(e, errors.DeterminedError):
                raise
            raise errors.DeterminedError(f"the master could not start: {e.__class__.__name__}: {e}") from None
        if master.master.tasks is not None:  # the master config's idle timeouts of interactive tasks
            master.master.tasks.notebook_timeout = settings.get("notebook_timeout")
            if settings.get("tensorboard_timeout") is not None:
                master.master.tasks.tensorboard_timeout = float(settings["tensorboard_timeout"])
        total = master.master.total_slots()
        print(f"Master serving at {master.url} (API docs at {master.url}/docs)", flush=True)
        print(f"  data dir: {master.data_dir}\n  database: {_printable_db(master.master.db_url)}\n"
              f"  slots: {_describe_slots(master.master.rm, total)}\n"
              f"  checkpoint storage roots (shared_fs, directory): "
              f"{', '.join(map(str, master.master.storage_roots or []))}\n"
              f"  S3 endpoints: AWS's{''.join(f', {s}://{h}:{p}' for s, h, p in master.master.storage_endpoints)}\n"
              f"  trials run as: {_describe_trial_user(trial_user)}", flush=True)
        from determined.master.security import isolation

        warning = isolation.isolation_warning(trial_user, master.data_dir, _sqlite_file(master.master.db_url))
        if warning:
            logging.getLogger("determined.master").warning(warning)
        print(f"Use it from other shells with: export DET_MASTER={master.url}", flush=True)
        print("Stop with Ctrl-C or SIGTERM: running trials checkpoint first and resume at the next `det master up`.",
              flush=True)
        while not stop_requested.wait(0.5):
            pass
        print("Stopping: running trials checkpoint and stop…", flush=True)
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)
        master.stop(timeout=settings["preemption_timeout"] or master.master.preemption_timeout)
        print("Master stopped.", flush=True)
        return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _describe_trial_user(trial_user: Any) -> str:
    if trial_user is None:
        import os
        import pwd

        return (f"{pwd.getpwuid(os.geteuid()).pw_name}, the master's own user (not isolated; users' links with OS "
                "accounts, det user link-with-agent-user, are not used)")
    from determined.master.security import isolation

    return (f"each user's linked OS account (det user link-with-agent-user), else {isolation.describe(trial_user)}"
            f" (trial_user)")


def _sqlite_file(url: str) -> Any:
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    return parsed.database if parsed.get_backend_name() == "sqlite" else None


def _describe_slots(rm: Any, total: Any) -> str:
    describe = getattr(rm, "describe", None)
    if describe is not None:
        return str(describe())
    return f"{total} {rm.slots.kind if rm is not None else ''}".rstrip()


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("master", help="run the master as a server")
    s = p.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    u = s.add_parser("up", help="serve the REST API and run experiments until Ctrl-C / SIGTERM")
    u.add_argument("--host", default=None, help="address to listen on (default 127.0.0.1)")
    u.add_argument("--port", type=int, default=None, help=f"port to listen on (default {DEFAULT_PORT}; 0: any free port)")
    u.add_argument("--db", default=None, metavar="URL",
                   help="database: postgresql://USER:PASSWORD@HOST:PORT/DB (default: $DET_DB_URL, else SQLite in the data dir)")
    u.add_argument("--data-dir", dest="data_dir", default=None,
                   help="data dir: checkpoints, work dirs, the lock file (default: $DET_DATA_DIR, else ~/.local/share/determined)")
    u.add_argument("--cpu-slots", dest="cpu_slots", type=int, default=None, metavar="N",
                   help="number of CPU slots when the machine has no GPU (default: $DET_CPU_SLOTS, else the CPU count)")
    u.add_argument("--preemption-timeout", dest="preemption_timeout", type=float, default=None, metavar="SECONDS",
                   help="how long trials get to checkpoint when asked to stop before they are killed (default 60)")
    u.add_argument("--resource-manager", dest="resource_manager", choices=("local", "ray"), default=None,
                   help="where trials run: local (this machine, the default) or ray (a Ray cluster)")
    u.add_argument("--ray-address", dest="ray_address", default=None, metavar="HOST:PORT",
                   help="the Ray cluster's head (GCS) address (default: $RAY_ADDRESS, else auto: the cluster "
                        "started on this machine)")
    u.add_argument("--ray-slot-type", dest="ray_slot_type", choices=("cpu", "gpu"), default=None,
                   help="a slot is one GPU or a number of CPUs (default: gpu when the cluster has GPUs)")
    u.add_argument("--ray-cpus-per-slot", dest="ray_cpus_per_slot", type=float, default=None, metavar="N",
                   help="CPUs of each slot (a GPU slot also takes them; default 1)")
    u.add_argument("--allowed-host", dest="allowed_hosts", action="append", default=None, metavar="NAME",
                   help="also answer requests for this host name, e.g. a reverse proxy's (repeatable; '*': any). "
                        "Besides, the master answers only its own address and names and IP addresses")
    u.add_argument("--allowed-storage-root", dest="checkpoint_storage_roots", action="append", default=None,
                   metavar="DIR", help="a directory where experiments may keep shared_fs checkpoints (repeatable; "
                                       "default: the data dir's checkpoints/)")
    u.add_argument("--allowed-storage-endpoint", dest="checkpoint_storage_endpoints", action="append", default=None,
                   metavar="URL", help="an S3 endpoint_url experiments may use besides AWS's own, e.g. "
                                       "http://minio.internal:9000 (repeatable; default: none)")
    u.add_argument("--trial-user", dest="trial_user", default=None, metavar="USER",
                   help="run trial processes as this OS user, kept away from the master's data dir (the master "
                        "must run as root; see docs/auth.md)")
    u.add_argument("--config", default=None, metavar="master.yaml",
                   help=f"YAML file with any of {', '.join(_CONFIG_KEYS)} (options given here win)")
    u.set_defaults(func=up)
