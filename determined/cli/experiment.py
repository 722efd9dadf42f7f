"""`det experiment ...`"""
import argparse
import os
from typing import Any, Dict

from determined import config as det_config
from determined.cli import _render
from determined.experimental import _connect, _follow, _native, _run


def _load_raw(path: str) -> Dict[str, Any]:
    return det_config.load_config_file(path)


def create(args: argparse.Namespace) -> int:
    raw = _load_raw(args.config_file)
    if args.local and args.test_mode:
        return _local_test(raw, args.model_def)
    if args.test_mode:
        _run.validate_config(raw)
        raw = _native.test_config(raw)
    if args.paused:
        body = _run.prepare_submission(raw, args.model_def)
        body["activate"] = False
        session = _connect.read_session(args.master)
        exp = session.post("/experiments", body)["experiment"]
        print(f"Created experiment {exp['id']}")
        return 0
    desc = _run.run_experiment(raw, args.model_def, master=args.master, local=args.local, follow=not args.detach)
    return _run.exit_code_for(desc) if not args.detach else 0


def _local_test(raw: Dict[str, Any], model_dir: str) -> int:
    from determined import _execution

    canonical = _run.validate_config(raw)
    from determined.common import context as det_context

    det_context.check_entrypoint(model_dir, canonical.get("entrypoint"))
    model_dir = os.path.abspath(model_dir)
    os.chdir(model_dir)
    trial_class = _execution.load_trial_class(canonical["entrypoint"], model_dir)
    summary = _execution.test_one_batch(trial_class, canonical)
    print("Local test mode passed: one training batch, a full validation and a checkpoint all worked.")
    for key in ("training_metrics", "validation_metrics"):
        if summary.get(key):
            print(f"  {key.replace('_', ' ')}: {_render.metrics_text(summary[key])}")
    return 0


def _summary_row(e: Dict[str, Any]) -> list:
    return [
        e["id"],
        e["state"],
        f"{(e.get('progress') or 0) * 100:.0f}%",
        e.get("num_trials", 0),
        e["config"]["searcher"]["name"],
        _render.fmt_metric(e.get("best_validation")),
        _render.fmt_time(e.get("start_time")),
        _render.fmt_time(e.get("end_time")),
        e.get("description", ""),
    ]


def list_experiments(args: argparse.Namespace) -> int:
    exps = _connect.read_session(args.master).get("/experiments")["experiments"]
    if not args.all:
        exps = [e for e in exps if not e.get("archived")]
    if args.json:
        _render.print_json(exps)
        return 0
    headers = ["ID", "State", "Progress", "Trials", "Searcher", "Best", "Start", "End", "Description"]
    rows = [_summary_row(e) for e in exps]
    if args.csv:
        _render.csv_rows(headers, rows)
    else:
        _render.table(headers, rows)
    return 0


def describe(args: argparse.Namespace) -> int:
    session = _connect.read_session(args.master)
    descs = [session.get(f"/experiments/{i}") for i in args.experiment_ids]
    if args.json:
        out = []
        for d in descs:
            item = dict(d["experiment"])
            item["trials"] = d["trials"]
            item["checkpoints"] = session.get(f"/experiments/{item['id']}/checkpoints")["checkpoints"]
            out.append(item)
        _render.print_json(out[0] if len(out) == 1 else out)
        return 0
    for d in descs:
        e = d["experiment"]
        _render.table(
            ["ID", "State", "Progress", "Trials", "Searcher", "Best", "Start", "End", "Description"], [_summary_row(e)]
        )
        _render.console.print(_follow.trials_table(e, d["trials"], title="Trials"))
        if args.metrics:
            for t in d["trials"]:
                td = session.get(f"/trials/{t['id']}")
                rows = [[v["steps_completed"], _render.metrics_text(v["metrics"])] for v in td["validation_metrics"]]
                _render.table(["Batches", "Validation metrics"], rows, title=f"Trial {t['id']}")
    return 0


def list_trials(args: argparse.Namespace) -> int:
    d = _connect.read_session(args.master).get(f"/experiments/{args.experiment_id}")
    if args.json:
        _render.print_json(d["trials"])
        return 0
    _render.console.print(_follow.trials_table(d["experiment"], d["trials"]))
    return 0


def _action(name: str):
    def run(args: argparse.Namespace) -> int:
        session = _connect.read_session(args.master)
        exp = session.post(f"/experiments/{args.experiment_id}/{name}")["experiment"]
        print(f"Experiment {exp['id']} is {exp['state']}")
        return 0

    return run


def activate(args: argparse.Namespace) -> int:
    desc = _run.activate_experiment(args.experiment_id, master=args.master)
    return _run.exit_code_for(desc)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("experiment", aliases=["e"], help="manage experiments")
    s = p.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")

    c = s.add_parser("create", help="create an experiment (and, with no master configured, run it here)")
    c.add_argument("config_file", help="experiment config file (.yaml)")
    c.add_argument("model_def", help="model definition directory")
    c.add_argument("--local", action="store_true", help="run on this machine even if DET_MASTER is set")
    c.add_argument("-t", "--test-mode", "--test", dest="test_mode", action="store_true",
                   help="one batch, a full validation and a checkpoint (in-process with --local)")
    c.add_argument("--paused", action="store_true", help="create the experiment without starting it")
    c.add_argument("-d", "--detach", action="store_true", help="with a configured master: do not follow progress")
    c.set_defaults(func=create)

    ls = s.add_parser("list", help="list experiments")
    ls.add_argument("-a", "--all", action="store_true", help="include archived experiments")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--csv", action="store_true")
    ls.set_defaults(func=list_experiments)

    d = s.add_parser("describe", help="describe experiments")
    d.add_argument("experiment_ids", type=int, nargs="+")
    d.add_argument("--json", action="store_true")
    d.add_argument("--metrics", action="store_true", help="also print every validation of every trial")
    d.set_defaults(func=describe)

    lt = s.add_parser("list-trials", aliases=["lt"], help="list the trials of an experiment")
    lt.add_argument("experiment_id", type=int)
    lt.add_argument("--json", action="store_true")
    lt.set_defaults(func=list_trials)

    a = s.add_parser("activate", help="activate (resume) an experiment; with no master running, run it here")
    a.add_argument("experiment_id", type=int)
    a.set_defaults(func=activate)
    for name, help_text in (("pause", "pause an experiment (its trials checkpoint first)"),
                            ("cancel", "cancel an experiment (its trials checkpoint first)"),
                            ("kill", "kill an experiment's trials at once")):
        x = s.add_parser(name, help=help_text)
        x.add_argument("experiment_id", type=int)
        x.set_defaults(func=_action(name))
