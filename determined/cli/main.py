"""The `det` command line.

Thin on purpose: building the parser imports only argparse and the command modules, whose own imports happen
when a command runs, so `det --help` and the read commands start fast (benchmarks/cli_latency.py).
"""
import argparse
import os
import sys
from typing import Any, List, NoReturn, Optional

import determined
from determined import errors


class _Parser(argparse.ArgumentParser):
    """Usage errors print the usage and "Error: ..." and exit 1, like every other bad input; a misspelled
    command or choice gets "did you mean ...?"."""

    def error(self, message: str) -> "NoReturn":  # type: ignore[override]
        self.print_usage(sys.stderr)
        print(f"Error: {message} (see {self.prog} --help)", file=sys.stderr)
        sys.exit(1)

    def _check_value(self, action: argparse.Action, value: Any) -> None:
        choices = action.choices
        if choices is None or value in choices:
            return
        from determined.config.suggest import did_you_mean

        names = [c for c in choices if isinstance(c, str)]
        shown = ", ".join(sorted(n for n in names if len(n) > 1 or len(names) < 8))
        raise argparse.ArgumentError(
            action, f"invalid choice: {value!r}{did_you_mean(str(value), names)}; choose from {shown}")


def _parser() -> argparse.ArgumentParser:
    from determined.cli import (checkpoint, deploy, experiment, import_cmd, master, model, preview, template,
                                tensorboard, trial, user, workspace)
    from determined.cli import cmd, notebook, shell, task
    from determined.cli import agent, job, resource_pool

    parser = _Parser(prog="det", description="Train Determined Trials: experiments, trials, checkpoints.")
    parser.add_argument("-m", "--master", default=None,
                        help="master URL (default: $DET_MASTER; unset = the embedded master of the local data dir)")
    parser.add_argument("-u", "--user", default=None,
                        help="run this command as USER (default: $DET_USER, else the last `det user login`, else "
                             "'determined')")
    parser.add_argument("-v", "--version", action="version", version=f"det {determined.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    experiment.add_parser(sub)
    trial.add_parser(sub)
    checkpoint.add_parser(sub)
    preview.add_parser(sub)
    model.add_parser(sub)
    master.add_parser(sub)
    user.add_parser(sub)
    tensorboard.add_parser(sub)
    workspace.add_parser(sub)
    template.add_parser(sub)
    deploy.add_parser(sub)
    import_cmd.add_parser(sub)
    cmd.add_parser(sub)
    notebook.add_parser(sub)
    shell.add_parser(sub)
    task.add_parser(sub)
    job.add_parser(sub)
    resource_pool.add_parser(sub)
    agent.add_parser(sub)
    v = sub.add_parser("version", help="print the version")
    v.set_defaults(func=lambda args: print(f"det {determined.__version__}") or 0)
    return parser


def _print_error(e: BaseException) -> None:
    from determined.common.formats import escape_control

    lines = str(e).split("\n")  # a message names the problems one per line; user text in it is escaped
    print("Error: " + "\n".join(escape_control(line) for line in lines), file=sys.stderr)


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    saved = {k: os.environ.get(k) for k in ("DET_USER", "DET_SESSION_TOKEN")}
    if args.user:
        os.environ["DET_USER"] = args.user
        os.environ.pop("DET_SESSION_TOKEN", None)  # act as that user, not as a trial's process
    try:
        return _run(args)
    finally:
        for key, value in saved.items():  # main() may run in a longer-lived process (tests, notebooks)
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _run(args: argparse.Namespace) -> int:
    try:
        code = args.func(args)
    except (errors.DeterminedError, FileNotFoundError, PermissionError) as e:  # InvalidExperimentConfig is one
        _print_error(e)
        code = 1
    except ValueError as e:
        from determined.config import InvalidExperimentConfig

        if not isinstance(e, InvalidExperimentConfig):
            raise
        _print_error(e)
        code = 1
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        code = 0
    return int(code or 0)


def entry() -> None:
    """The `det` script: `main()`, then the end of the process without the interpreter's teardown."""
    from determined.common._exit import exit_process

    exit_process(main())


if __name__ == "__main__":
    entry()
