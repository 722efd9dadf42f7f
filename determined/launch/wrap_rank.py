"""`python3 -m determined.launch.wrap_rank [--no-redirect-stdio] RANK SCRIPT...`

Runs SCRIPT and prefixes each line of its stdout and stderr with `[rank=N] ` (a line ends at a newline or a
carriage return; a very long line is cut into several). RANK is an integer, or a comma-separated list of
environment variables tried in order (e.g. `RANK,OMPI_COMM_WORLD_RANK`). Exits with SCRIPT's status. SCRIPT
runs in its own process group, to which SIGTERM, SIGINT, SIGHUP and SIGUSR1/2 are passed on, so that it gets
each signal once and this process relays its output to the end.
`--no-redirect-stdio` is accepted for Determined's command lines (the output always goes to this process's
stdout and stderr, which are the trial's logs).
"""
import argparse
import os
import signal
import subprocess
import sys
from typing import List, Optional

from determined.common._process import die_with_parent
from determined.exec import _script
from determined.exec.launch import _relay
from determined.launch import FORWARDED



def resolve_rank(spec: str) -> int:
    """RANK as an int, or the value of the first of the named environment variables that is set."""
    if spec.isdigit():
        return int(spec)
    for name in (n.strip() for n in spec.split(",")):
        value = os.environ.get(name)
        if value is not None:
            try:
                return int(value)
            except ValueError:
                raise ValueError(f"{name}={value!r} is not an integer rank") from None
    raise ValueError(f"none of the environment variables {spec} is set; give the rank or the variable that holds it")


def _signal_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m determined.launch.wrap_rank",
                                     description="Prefix each output line of SCRIPT with its rank.")
    parser.add_argument("--no-redirect-stdio", action="store_true", help="accepted; output goes to stdout/stderr")
    parser.add_argument("rank", metavar="RANK", help="an integer, or environment variables to read it from")
    parser.add_argument("script", nargs=argparse.REMAINDER, metavar="SCRIPT...")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    script = args.script[1:] if args.script[:1] == ["--"] else args.script
    if not script:
        parser.error("give the command to run after RANK")
    try:
        rank = resolve_rank(args.rank)
    except ValueError as e:
        parser.error(str(e))
    prefix = f"[rank={rank}] ".encode()
    try:
        proc = subprocess.Popen(_script.command_argv(script), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, preexec_fn=die_with_parent)
    except OSError as e:
        print(f"wrap_rank: cannot start {script[0]!r}: {e.strerror or e}", file=sys.stderr)
        return 127
    for signum in FORWARDED:
        signal.signal(signum, lambda signum, frame: _signal_group(proc.pid, signum))
    assert proc.stdout is not None and proc.stderr is not None
    relays = [_relay(prefix, proc.stdout, sys.stdout.buffer), _relay(prefix, proc.stderr, sys.stderr.buffer)]
    code = proc.wait()
    for relay in relays:
        relay.join()
    return _script.exit_status(code)


if __name__ == "__main__":
    sys.exit(main())
