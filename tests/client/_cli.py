"""Running `det` in the test process: the real CLI code (argument parsing, rendering, exit codes), no start-up cost."""
import io
import json
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from typing import Any


def det(*args: str, check: bool = False, stdin: str = "") -> subprocess.CompletedProcess:
    """`det ARGS` through determined.cli.main.main; the answer looks like subprocess.run's."""
    from determined.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as e:  # argparse's --help and usage errors
                code = e.code if isinstance(e.code, int) else 1
    finally:
        sys.stdin = old_stdin
    proc = subprocess.CompletedProcess(["det", *args], code, out.getvalue(), err.getvalue())
    if check and code != 0:
        raise AssertionError(f"det {' '.join(args)} failed ({code}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def det_json(*args: str) -> Any:
    return json.loads(det(*args, "--json", check=True).stdout)


def cli_fails(proc: subprocess.CompletedProcess, *needles: str) -> None:
    """The command failed as bad input should: exit 1, "Error: ..." naming each needle, no traceback."""
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Error:" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr
