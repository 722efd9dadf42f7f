"""`det experiment` commands of Determined 0.38 that change an experiment or show its logs: `set name|description|
labels|max-slots|weight|priority`, `label add|remove`, `delete`, `logs`."""
import argparse
from typing import Any, Dict


def _patch(args: argparse.Namespace, body: Dict[str, Any]) -> Dict[str, Any]:
    from determined.experimental import _connect

    return _connect.read_session(args.master).patch(f"/experiments/{args.experiment_id}", body)["experiment"]


def _setter(field: str, label: str):
    def run(args: argparse.Namespace) -> int:
        if field == "labels":
            value: Any = [x.strip() for x in args.value.split(",") if x.strip()] if args.value else []
        else:
            value = args.value
        exp = _patch(args, {field: value})
        shown = ", ".join(exp["labels"]) if field == "labels" else exp.get(field)
        print(f"Set the {label} of experiment {exp['id']} to: {shown}")
        return 0

    return run


def _resource_setter(field: str, label: str):
    def run(args: argparse.Namespace) -> int:
        exp = _patch(args, {"resources": {field: args.value}})
        print(f"Set the {label} of experiment {exp['id']} to {exp['config']['resources'].get(field)}")
        return 0

    return run


def label(args: argparse.Namespace) -> int:
    from determined.experimental import _connect

    session = _connect.read_session(args.master)
    labels = list(session.get(f"/experiments/{args.experiment_id}")["experiment"]["labels"])
    if args.action == "add":
        labels += [] if args.label in labels else [args.label]
    else:
        if args.label not in labels:
            print(f"Experiment {args.experiment_id} has no label {args.label!r}; its labels: "
                  f"{', '.join(labels) or '(none)'}")
            return 0
        labels.remove(args.label)
    exp = session.patch(f"/experiments/{args.experiment_id}", {"labels": labels})["experiment"]
    print(f"Labels of experiment {exp['id']}: {', '.join(exp['labels']) or '(none)'}")
    return 0


def delete(args: argparse.Namespace) -> int:
    from determined.cli.experiment import _confirm
    from determined.experimental import _connect

    session = _connect.read_session(args.master)
    exp = session.get(f"/experiments/{args.experiment_id}")["experiment"]
    if not args.yes and not _confirm(f"Delete experiment {exp['id']} ({exp['state']}) with its checkpoints (their "
                                     "files too), metrics and logs? This cannot be undone."):
        print("Aborted: nothing was changed.")
        return 1
    answer = session.delete(f"/experiments/{args.experiment_id}")
    print(f"Deleted experiment {args.experiment_id}"
          + (f" and {len(answer['deleted_checkpoints'])} checkpoint(s)" if answer.get("deleted_checkpoints") else ""))
    return 0


def logs(args: argparse.Namespace) -> int:
    """The logs of the experiment's first trial (Determined 0.38's `det e logs`)."""
    import time

    from determined.cli.trial import print_logs
    from determined.experimental import _connect

    session = _connect.read_session(args.master)
    while True:
        desc = session.get(f"/experiments/{args.experiment_id}")
        if desc["trials"] or not args.follow or desc["experiment"]["state"] in ("COMPLETED", "CANCELED", "ERROR"):
            break
        time.sleep(0.5)
    if not desc["trials"]:
        print(f"Experiment {args.experiment_id} has no trials yet.")
        return 0
    return print_logs(session, min(t["id"] for t in desc["trials"]), args)


def delete_tb_files(args: argparse.Namespace) -> int:
    """`det experiment delete-tb-files ID`: the TensorBoard event files of its trials."""
    from determined.experimental import _connect

    answer = _connect.read_session(args.master).delete(f"/experiments/{args.experiment_id}/tensorboard-files")
    print(f"Deleted the TensorBoard files of experiment {args.experiment_id}" if answer.get("deleted") else
          f"Experiment {args.experiment_id} has no TensorBoard files")
    return 0


def continue_(args: argparse.Namespace) -> int:
    """Continue an ended experiment: its trials that did not complete (a single-searcher experiment's trial, with
    the config changes given) train on from their latest checkpoint."""
    from determined.cli.experiment import _load_raw
    from determined.config.overrides import apply_overrides
    from determined.experimental import _run

    override = apply_overrides(_load_raw(args.config_file) if args.config_file else {}, args.config or [])
    desc = _run.continue_experiment(args.experiment_id, override, master=args.master,
                                    follow_first_trial=args.follow_first_trial)
    return _run.exit_code_for(desc)


def add_parsers(s: argparse._SubParsersAction, sets: argparse._SubParsersAction) -> None:
    """Add the commands to `det experiment` (`s`) and its `set` subcommand (`sets`)."""
    from determined.cli.trial import add_log_arguments

    for name, field, help_text in (("name", "name", "rename an experiment"),
                                   ("description", "description", "change an experiment's description"),
                                   ("labels", "labels", "replace an experiment's labels (comma-separated)")):
        x = sets.add_parser(name, help=help_text)
        x.add_argument("experiment_id", type=int)
        x.add_argument("value", metavar=name.upper())
        x.set_defaults(func=_setter(field, name))
    for name, field, kind, help_text in (
            ("max-slots", "max_slots", int, "the most slots the experiment may use at once"),
            ("weight", "weight", float, "the experiment's share of the slots under fair share"),
            ("priority", "priority", int, "the experiment's priority (1 to 99; lower runs first)")):
        x = sets.add_parser(name, help=help_text)
        x.add_argument("experiment_id", type=int)
        x.add_argument("value", type=kind, metavar=name.upper().replace("-", "_"))
        x.set_defaults(func=_resource_setter(field, name))

    lb = s.add_parser("label", help="add or remove a label of an experiment")
    lbs = lb.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action in ("add", "remove"):
        x = lbs.add_parser(action, help=f"{action} a label")
        x.add_argument("experiment_id", type=int)
        x.add_argument("label")
        x.set_defaults(func=label)

    d = s.add_parser("delete", help="delete an ended experiment with its checkpoints, metrics and logs")
    d.add_argument("experiment_id", type=int)
    d.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    d.set_defaults(func=delete)

    tb = s.add_parser("delete-tb-files", help="delete the TensorBoard event files of an experiment's trials")
    tb.add_argument("experiment_id", type=int)
    tb.set_defaults(func=delete_tb_files)

    co = s.add_parser("continue", help="continue an ended experiment from its trials' latest checkpoints")
    co.add_argument("experiment_id", type=int)
    co.add_argument("--config-file", default=None, metavar="FILE", help="config fields to change (single searcher)")
    co.add_argument("--config", action="append", default=None, metavar="KEY=VALUE",
                    help="change a config field, e.g. --config searcher.max_length.batches=200 (repeatable)")
    co.add_argument("-f", "--follow-first-trial", action="store_true", help="print the first trial's logs as it runs")
    co.set_defaults(func=continue_)

    lg = s.add_parser("logs", help="print the logs of an experiment's first trial")
    lg.add_argument("experiment_id", type=int)
    add_log_arguments(lg)
    lg.set_defaults(func=logs)

