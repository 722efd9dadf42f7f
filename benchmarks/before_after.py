"""One benchmark on two trees in one run: a git revision ("before") and the working tree or a second revision
("after", `--after REV`).

The revision is exported (`git archive`) to a temporary directory; each tree's copy of the benchmark script runs
with that tree first on PYTHONPATH (the same virtualenv, so only the project's code differs), the two runs one
after the other, `--rounds` times alternating so that a machine's load drifts over both alike. Each run's output
is printed under its label; compare the ratios each benchmark prints against its own in-run baseline.

    .venv/bin/python benchmarks/before_after.py 7fabee2 cli_latency.py -- --repeats 9
    .venv/bin/python benchmarks/before_after.py --after HEAD --rounds 2 7fabee2 master_scale.py -- --parts ticks

(its own options before the revision; the benchmark's after `--`)
"""
import argparse
import os
import pathlib
import subprocess
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]


def export(revision: str, into: pathlib.Path) -> pathlib.Path:
    archive = subprocess.run(["git", "-C", str(REPO), "archive", revision], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run(tree: pathlib.Path, script: str, args: list, label: str) -> int:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tree)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    print(f"\n===== {label}: {tree} =====", flush=True)
    return subprocess.run([sys.executable, str(tree / "benchmarks" / script), *args], cwd=str(tree), env=env).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("revision", help="the 'before' tree: a commit, tag or branch of this repository")
    parser.add_argument("script", help="a script under benchmarks/, e.g. cli_latency.py")
    parser.add_argument("--after", default=None, help="the 'after' tree: a revision (default: the working tree)")
    parser.add_argument("--rounds", type=int, default=1, help="before/after pairs, alternating (default 1)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- then the benchmark's own arguments")
    ns = parser.parse_args()
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    with tempfile.TemporaryDirectory(prefix="before-") as tmp, tempfile.TemporaryDirectory(prefix="after-") as tmp2:
        before = export(ns.revision, pathlib.Path(tmp))
        after = export(ns.after, pathlib.Path(tmp2)) if ns.after else REPO
        label = ns.after or "working tree"
        code = 0
        for round_ in range(ns.rounds):
            code |= run(before, ns.script, args, f"before ({ns.revision}), round {round_ + 1}")
            code |= run(after, ns.script, args, f"after ({label}), round {round_ + 1}")
    return code


if __name__ == "__main__":
    sys.exit(main())
