"""`det experiment` commands of Determined 0.38 that change an experiment or show its logs: `set name|description|
labels|max-slots|weight|priority`, `label add|remove`, `delete`, `logs`."""
import argparse

from determined.cli import _args, _lookup


def _setter(field: str, label: str):
    def run(args: argparse.Namespace) -> int:
        experiment = _lookup.experiment(args)
        if field == "labels":
            experiment.set_labels([x.strip() for x in args.value.split(",") if x.strip()] if args.value else [])
        else:
            getattr(experiment, f"set_{field}")(args.value)
        exp = experiment.to_json()
        shown = ", ".join(exp["labels"]) if field == "labels" else exp.get(field)
        print(f"Set the {label} of experiment {exp['id']} to: {shown}")
        return 0

    return run


def _resource_setter(field: str, label: str):
    def run(args: argparse.Namespace) -> int:
        experiment = _lookup.experiment(args)
        getattr(experiment, f"set_{field}")(args.value)
        exp = experiment.to_json()
        print(f"Set the {label} of experiment {exp['id']} to {exp['config']['resources'].get(field)}")
        return 0

    return run


def label(args: argparse.Namespace) -> int:
    experiment = _lookup.experiment(args)
    labels = list(experiment.to_json()["labels"])
    if args.action == "add":
        labels += [] if args.label in labels else [args.label]
    else:
        if args.label not in labels:
            print(f"Experiment {args.experiment_id} has no label {args.label!r}; its labels: "
                  f"{', '.join(labels) or '(none)'}")
            return 0
        labels.remove(args.label)
    experiment.set_labels(labels)
    exp = experiment.to_json()
    print(f"Labels of experiment {exp['id']}: {', '.join(exp['labels']) or '(none)'}")
    return 0


def delete(args: argparse.Namespace) -> int:
    experiment = _lookup.experiment(args)
    exp = experiment.to_json()
    if not args.yes and not _args.confirm(f"Delete experiment {exp['id']} ({exp['state']}) with its checkpoints (their "
                                     "files too), metrics and logs? This cannot be undone."):
        print("Aborted: nothing was changed.")
        return 1
    deleted = experiment.delete()
    print(f"Deleted experiment {args.experiment_id}"
          + (f" and {len(deleted)} checkpoint(s)" if deleted else ""))
    return 0


def logs(args: argparse.Namespace) -> int:
    """The logs of the experiment's first trial (Determined 0.38's `det e logs`)."""
    import time

    from determined.cli.trial import print_logs

    experiment = _lookup.experiment(args)
    while True:
        trials = experiment.list_trials()  # reads the experiment too
        if trials or not args.follow or experiment.to_json()["state"] in ("COMPLETED", "CANCELED", "ERROR"):
            break
        time.sleep(0.5)
    if not trials:
        print(f"Experiment {args.experiment_id} has no trials yet.")
        return 0
    return print_logs(min(trials, key=lambda t: t.id), args)


def delete_tb_files(args: argparse.Namespace) -> int:
    """`det experiment delete-tb-files ID`: the TensorBoard event files of its trials."""
    deleted = _lookup.experiment(args).delete_tensorboard_files()
    print(f"Deleted the TensorBoard files of experiment {args.experiment_id}" if deleted else
          f"Experiment {args.experiment_id} has no TensorBoard files")
    return 0


def continue_(args: argparse.Namespace) -> int:
    """Continue an ended experiment: its trials that did not complete (a single-searcher experiment's trial, with
    the config changes given) train on from their latest checkpoint."""
    from determined import config as det_config
    from determined.config.overrides import apply_overrides
    from determined.experimental import _run

    override = apply_overrides(det_config.load_config_file(args.config_file) if args.config_file else {},
                               args.config or [])
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

