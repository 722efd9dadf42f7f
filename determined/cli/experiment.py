"""`det experiment ...`"""
import argparse
import json
import os
import pathlib
import sys
import time
from typing import Any, Dict, List, Optional

from determined import errors
from determined.cli import _args, _lookup, _render
from determined.common.formats import duration_between, fmt_duration

def _load_raw(path: str) -> Dict[str, Any]:
    from determined import config as det_config

    return det_config.load_config_file(path)


def _print_notes(raw: Dict[str, Any], master: Optional[str] = None) -> None:
    """One line per config field that has no effect here (an invalid config is reported by the command); whether
    bind_mounts do depends on the master it goes to (`master`, a configured URL: its GET /master/info says)."""
    from determined import config as det_config

    try:
        canonical = det_config.load_experiment_config(raw)
    except det_config.InvalidExperimentConfig:
        return
    sandboxed = _trials_sandboxed(master) if canonical.get("bind_mounts") else None
    for note in det_config.no_effect_notes(canonical, sandboxed=sandboxed):
        print(f"note: {note}", file=sys.stderr)


def _trials_sandboxed(master: Optional[str]) -> Optional[bool]:
    """Whether the configured master runs trials in a sandbox (None: no master configured, or no answer)."""
    if not master:
        return None
    import httpx

    try:
        answer = httpx.get(f"{master.rstrip('/')}/api/v1/master/info", timeout=5.0)
        value = answer.json().get("trials_sandboxed") if answer.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    return value if isinstance(value, bool) else None


def _apply_cpu_slots(args: argparse.Namespace) -> None:
    """--cpu-slots N: the CPU slots of the master this command starts (DET_CPU_SLOTS for it)."""
    from determined.experimental import _connect

    if getattr(args, "cpu_slots", None) is None:
        return
    if args.cpu_slots < 1:
        raise errors.DeterminedError(f"--cpu-slots must be a positive number of slots, got {args.cpu_slots}")
    if not args.local and _connect.configured_master(args.master):
        raise errors.DeterminedError(
            "--cpu-slots sets the slots of the master this command starts; with DET_MASTER set the running "
            "master's slots apply (start it with `det master up --cpu-slots N`), or add --local"
        )
    os.environ["DET_CPU_SLOTS"] = str(args.cpu_slots)


def _template_config(args: argparse.Namespace) -> Optional[Dict[str, Any]]:
    """The config of the template `--template` names, as the master stores it (for checking the merged config)."""
    if not args.template:
        return None
    return _lookup.templates(args).get_template(args.template).config  # type: ignore[no-any-return]


def create(args: argparse.Namespace) -> int:
    from determined.cli import workspace
    from determined.config.overrides import apply_overrides, merge_template

    for option in ("config", "template", "project_id", "project"):  # callers that build their own Namespace
        if not hasattr(args, option):
            setattr(args, option, None)
    args.follow_first_trial = getattr(args, "follow_first_trial", False)
    _apply_cpu_slots(args)
    raw = workspace.project_target(args, apply_overrides(_load_raw(args.config_file), args.config or []))
    _prewarm_early(args, raw)
    from determined.experimental import _connect, _native, _run

    template = _template_config(args)
    _print_notes(merge_template(raw, template) if template is not None else raw,
                 None if args.local else _connect.configured_master(args.master))
    if template is not None and args.test_mode:
        raw, template = merge_template(raw, template), None  # test mode changes the merged config
    if args.local and args.test_mode:
        if args.model_def is None or getattr(args, "include", None):
            raise errors.DeterminedError("--local --test runs the Trial of MODEL_DEF in place: give MODEL_DEF, "
                                         "without --include")
        return _local_test(raw, args.model_def)
    if args.test_mode:
        _run.validate_config(raw)
        raw = _native.test_config(raw)
    from determined.experimental.client._common import UsageError
    from determined.experimental.client._submit import submit_experiment

    template_name = args.template if template is not None else None
    includes = getattr(args, "include", None)
    try:  # the model dir (MODEL_DEF, or none: a command entrypoint may need no code) is staged with each --include
        if args.paused:
            exp = submit_experiment(_connect.Connection(args.master), raw, args.model_def, includes=includes,
                                    template=template_name, template_config=template, activate=False)
            print(f"Created experiment {exp['id']}")
            return 0
        desc = _run.run_experiment(raw, args.model_def, includes=includes, master=args.master, local=args.local,
                                   follow=not args.detach, follow_first_trial=args.follow_first_trial,
                                   template=template_name, template_config=template)
    except UsageError as e:  # a missing directory or include, in the CLI's words
        raise errors.DeterminedError(str(e).replace("model_dir", "MODEL_DEF").replace("includes:", "--include")) \
            from None
    return _run.exit_code_for(desc) if not args.detach else 0


def _prewarm_early(args: argparse.Namespace, raw: Dict[str, Any]) -> None:
    """When the experiment will run on the embedded master: start its framework's fork server before this command
    imports the client and the master (determined/experimental/_prewarm.py); `run_experiment` adopts it."""
    from determined.experimental import _connect, _prewarm

    runs_here = (not args.paused and not (args.local and args.test_mode) and not getattr(args, "include", None)
                 and not getattr(args, "detach", False))  # -d: a running master runs it, or the command refuses
    if not runs_here or (not args.local and _connect.configured_master(args.master)):
        return
    if args.model_def and os.path.isdir(args.model_def) and isinstance(raw, dict):
        _prewarm.prewarm(raw, args.model_def)


def _local_test(raw: Dict[str, Any], model_dir: str) -> int:
    from determined import _execution
    from determined.experimental import _run

    canonical = _run.validate_config(raw)
    from determined.common import context as det_context
    from determined.config.entrypoint import launched_trial_class, runs_a_script

    trial_class_name = canonical.get("entrypoint")
    if runs_a_script(canonical) and launched_trial_class(trial_class_name):
        # A launcher's `--trial module:Class` (0.20-0.38 configs): its Trial class is tested in this process.
        trial_class_name = launched_trial_class(trial_class_name)
    elif runs_a_script(canonical):
        raise errors.DeterminedError(
            f"--local --test runs one batch of a Trial class, but the entrypoint {canonical['entrypoint']!r} is a "
            "command: run the script itself on this machine (`det.core.init()` works without a master), or drop "
            "--local to run it as an experiment")

    if (canonical.get("searcher") or {}).get("name") == "custom" and not canonical.get("hyperparameters"):
        raise errors.DeterminedError(
            "--local --test draws the trial's hyperparameters from the config, but this config (searcher.name: "
            "custom) has none: a custom search method gives each trial its hyperparameters. Run it with its search "
            "runner (determined.searcher.LocalSearchRunner), or add a `hyperparameters:` section to test the Trial")
    det_context.check_entrypoint(model_dir, trial_class_name)
    model_dir = os.path.abspath(model_dir)
    if os.path.isfile(os.path.join(model_dir, "startup-hook.sh")):
        print("note: startup-hook.sh is not run in --local mode (nor was it by Determined): run it yourself if the "
              "trial needs what it installs", file=sys.stderr)
    os.chdir(model_dir)
    trial_class = _execution.load_trial_class(trial_class_name, model_dir)
    summary = _execution.test_one_batch(trial_class, canonical)
    print("Local test mode passed: one training batch, a full validation and a checkpoint all worked.")
    for key in ("training_metrics", "validation_metrics"):
        if summary.get(key):
            print(f"  {key.replace('_', ' ')}: {_render.metrics_text(summary[key])}")
    return 0


def _title(e: Dict[str, Any]) -> str:
    """The experiment's name (config `name`, 0.16+) or its description."""
    return str(e.get("name") or (e.get("config") or {}).get("name") or e.get("description") or "")


def _unrun(e: Dict[str, Any], info: Dict[str, Any]) -> bool:
    """An experiment that should be running (ACTIVE or stopping) but that no master runs: the command that ran it
    in the foreground ended (Ctrl-C under `| tee`, a closed terminal)."""
    return not info.get("scheduler", True) and e["state"] in ("ACTIVE", "STOPPING_CANCELED", "STOPPING_COMPLETED",
                                                              "STOPPING_ERROR")


_SUMMARY = [_render.Column("ID", _render.KEY, align="right"), _render.Column("State", _render.KEY),
            _render.Column("Progress", _render.NUMBER), _render.Column("Trials", _render.NUMBER, drop=3),
            _render.Column("Searcher", _render.TEXT, drop=2), _render.Column("Best", _render.NUMBER),
            _render.Column("Started", _render.NUMBER, drop=4, align="left"),
            _render.Column("Duration", _render.NUMBER, drop=1), _render.Column("Name", _render.TEXT)]


def _summary_row(e: Dict[str, Any], unrun: bool = False) -> list:
    return [
        e["id"],
        e["state"] + ("!" if unrun else ""),
        f"{(e.get('progress') or 0) * 100:.0f}%",
        e.get("num_trials", 0),
        e["config"]["searcher"]["name"],
        e.get("best_validation"),
        _render.fmt_time(e.get("start_time")),
        fmt_duration(duration_between(e.get("start_time"), e.get("end_time"))),
        _title(e),
    ]


def _unrun_note(ids: List[int]) -> List[str]:
    from determined.common.table import terminal_width, wrap

    if not ids:
        return []
    which = ", ".join(map(str, ids))
    return wrap(f"! no master runs experiment{'s' if len(ids) > 1 else ''} {which} (the command that ran "
                f"{'them' if len(ids) > 1 else 'it'} ended); resume with: det experiment activate {ids[0]}",
                terminal_width())


def list_experiments(args: argparse.Namespace) -> int:
    d = _lookup.client(args)
    exps = [e.to_json() for e in d.list_experiments()]
    archived = sum(1 for e in exps if e.get("archived"))
    if not args.all:
        exps = [e for e in exps if not e.get("archived")]
    if args.json:
        _render.print_json(exps)
        return 0
    show_project = getattr(args, "show_project", False)
    columns = ([_render.Column("Workspace", _render.TEXT), _render.Column("Project", _render.TEXT)]
               if show_project else []) + _SUMMARY

    def row(e: Dict[str, Any], unrun: bool = False) -> list:
        where = [e.get("workspace") or "", e.get("project") or ""] if show_project else []
        return where + _summary_row(e, unrun)

    if args.csv:  # for programs: the states as stored
        _render.csv_rows([c.header for c in columns], [row(e) for e in exps])
        return 0
    info = _lookup.master_info(d)
    rows = [row(e, _unrun(e, info)) for e in exps]
    if not exps:
        print("No experiments" + (f" (and {archived} archived: det experiment list --all)." if archived else
                                  " yet. Create one with: det experiment create CONFIG_FILE MODEL_DIR"))
        return 0
    _render.print_table(columns, rows)
    for line in _unrun_note([e["id"] for e in exps if _unrun(e, info)]):
        print(line)
    return 0


def show_config(args: argparse.Namespace) -> int:
    """`det experiment config ID`: the experiment's config as stored (with the defaults filled in), as YAML."""
    import yaml

    config = _lookup.experiment(args).get_config()
    sys.stdout.write(yaml.safe_dump(config, default_flow_style=False))
    return 0


def download_model_def(args: argparse.Namespace) -> int:
    """`det experiment download-model-def ID`: the model definition as OUTPUT_DIR/experiment_ID_model_def.tgz."""
    tgz = _lookup.experiment(args).get_model_definition()
    folder = pathlib.Path(args.output_dir).expanduser()
    if not folder.is_dir():
        raise errors.DeterminedError(f"--output-dir {args.output_dir!r} is not a directory")
    path = folder / f"experiment_{args.experiment_id}_model_def.tgz"
    path.write_bytes(tgz)
    _render.say(f"Saved the model definition of experiment {args.experiment_id} to {path}")
    return 0


def _describe_tables(args: argparse.Namespace, shared: Any, descs: List[Dict[str, Any]]) -> int:
    """The three tables of Determined 0.38's `describe --csv`/`--outdir`: experiments, trials and workloads (one row
    per trial and batch count with its checkpoint and validation), as CSV on stdout or as DIR/<table>.csv."""
    experiments = [[e["id"], e["state"], f"{(e.get('progress') or 0) * 100:.0f}%", e.get("start_time"),
                    e.get("end_time"), _title(e), e.get("description") or "", e.get("archived"),
                    e["config"].get("resources", {}).get("resource_pool", ""), ", ".join(sorted(e.get("labels") or []))]
                   for e in descs]
    trials = [[t["id"], e["id"], t["state"], t.get("start_time"), t.get("end_time"),
               json.dumps(t.get("hparams") or {}, sort_keys=True)] for e in descs for t in e["trials"]]
    details = [_lookup.trial(args, t["id"], shared).describe() for e in descs for t in e["trials"]]
    training_names = sorted({k for td in details for m in td["training_metrics"] for k in m["metrics"]}) \
        if args.metrics else []
    validation_names = sorted({k for td in details for m in td["validation_metrics"] for k in m["metrics"]})
    workloads = []
    for td in details:
        by_batch: Dict[int, Dict[str, Any]] = {}
        for kind in ("training_metrics", "validation_metrics", "checkpoints"):
            for record in td[kind]:
                by_batch.setdefault(record["steps_completed"], {})[kind] = record
        for batches in sorted(by_batch):
            entry = by_batch[batches]
            training = (entry.get("training_metrics") or {}).get("metrics") or {}
            validation = entry.get("validation_metrics") or {}
            ckpt = entry.get("checkpoints") or {}
            times = [r.get("end_time") for r in entry.values() if r.get("end_time")]
            workloads.append([td["id"], batches, ckpt.get("state") or ("COMPLETED" if validation else ""),
                              max(times) if times else None]
                             + [training.get(n) for n in training_names]
                             + [ckpt.get("state", ""), ckpt.get("uuid", ""), "COMPLETED" if validation else "",
                                validation.get("end_time")]
                             + [(validation.get("metrics") or {}).get(n) for n in validation_names])
    tables = [("experiments", ["Experiment ID", "State", "Progress", "Started", "Ended", "Name", "Description",
                               "Archived", "Resource Pool", "Labels"], experiments),
              ("trials", ["Trial ID", "Experiment ID", "State", "Started", "Ended", "H-Params"], trials),
              ("workloads", ["Trial ID", "# of Batches", "State", "Report Time"]
               + [f"Training {n}" for n in training_names]
               + ["Checkpoint State", "Checkpoint UUID", "Validation State", "Validation End Time"]
               + [f"Validation {n}" for n in validation_names], workloads)]
    if args.outdir:
        import contextlib
        import io

        folder = pathlib.Path(args.outdir).expanduser()
        if not folder.is_dir():
            raise errors.DeterminedError(f"--outdir {args.outdir!r} is not a directory")
        for name, headers, rows in tables:
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                _render.csv_rows(headers, rows)
            (folder / f"{name}.csv").write_text(out.getvalue())
        _render.say(f"Saved experiments.csv, trials.csv and workloads.csv in {folder}")
        return 0
    for i, (name, headers, rows) in enumerate(tables):
        if i:
            print()
        _render.csv_rows(headers, rows)
    return 0


def describe(args: argparse.Namespace) -> int:
    from determined.experimental import _follow

    shared = _lookup.connection(args)
    exps = [_lookup.experiment(args, i, shared) for i in _args.experiment_ids(args.experiment_ids)]
    if args.json and not (getattr(args, "csv", False) or getattr(args, "outdir", None)):
        out = [e.describe(checkpoints=True) for e in exps]
        _render.print_json(out[0] if len(out) == 1 else out)
        return 0
    descs = [e.describe() for e in exps]
    if getattr(args, "csv", False) or getattr(args, "outdir", None):
        return _describe_tables(args, shared, descs)
    info = _lookup.master_info(exps[0])
    for e in descs:
        _render.print_table(_SUMMARY, [_summary_row(e, _unrun(e, info))])
        for line in _unrun_note([e["id"]] if _unrun(e, info) else []):
            print(line)
        print()
        _follow.print_trials(e, e["trials"], title="Trials")
        if args.metrics:
            for t in e["trials"]:
                td = _lookup.trial(args, t["id"], shared).describe()
                rows = [[v["steps_completed"], _render.metrics_text(v["metrics"])] for v in td["validation_metrics"]]
                print()
                _render.table(["Batches", "Validation metrics"], rows, title=f"Trial {t['id']}",
                              empty="No validations yet.")
    return 0


def list_trials(args: argparse.Namespace) -> int:
    from determined.experimental import _follow

    d = _lookup.experiment(args).describe()
    if args.json:
        _render.print_json(d["trials"])
        return 0
    if getattr(args, "csv", False):
        _render.csv_rows(["Trial ID", "State", "H-Params", "Started", "Ended", "Batches", "Best validation"],
                         [[t["id"], t["state"], json.dumps(t.get("hparams") or {}, sort_keys=True),
                           t.get("start_time"), t.get("end_time"), t.get("total_batches"),
                           t.get("best_validation")] for t in d["trials"]])
        return 0
    _follow.print_trials(d, d["trials"])
    return 0


def download(args: argparse.Namespace) -> int:
    from determined.cli.checkpoint import print_downloaded

    if args.top_n < 1:
        raise errors.DeterminedError(f"--top-n must be a positive number of checkpoints, not {args.top_n}")
    if args.smaller_is_better is not None and args.sort_by is None:
        raise errors.DeterminedError("--smaller-is-better only goes with --sort-by METRIC")
    exp = _lookup.client(args).get_experiment(args.experiment_id)
    checkpoints = exp.top_n_checkpoints(args.top_n, sort_by=args.sort_by,
                                        smaller_is_better=_args.smaller_is_better(args.smaller_is_better))
    for c in checkpoints:
        print_downloaded(c, c.download(os.path.join(args.output_dir, c.uuid)), args.quiet)
    return 0


_GC_FIELDS = ("save_experiment_best", "save_trial_best", "save_trial_latest")


def set_gc_policy(args: argparse.Namespace) -> int:
    policy = {f: getattr(args, f) for f in _GC_FIELDS if getattr(args, f) is not None}
    if not policy:
        raise errors.DeterminedError(
            "give at least one of --save-experiment-best, --save-trial-best, --save-trial-latest"
        )
    for field, value in policy.items():
        if value < 0:
            raise errors.DeterminedError(f"--{field.replace('_', '-')} must be 0 or more, not {value}")
    from determined.cli.checkpoint import checkpoint_columns, checkpoint_rows

    exp = _lookup.experiment(args)
    metric = exp.to_json()["searcher_metric"]
    preview = exp.preview_gc_policy(**policy)
    if preview:
        _render.print_table(checkpoint_columns(metric), checkpoint_rows(preview, metric),
                            title="Checkpoints that would be deleted")
    else:
        print("No checkpoints would be deleted.")
    if not args.yes and not _args.confirm(
        f"Change the GC policy of experiment {args.experiment_id} to "
        + ", ".join(f"{k}={v}" for k, v in policy.items())
        + (f" and delete {len(preview)} checkpoint(s)?" if preview else "?")
    ):
        print("Aborted: nothing was changed.")
        return 1
    deleted = exp.set_gc_policy(**policy)
    print(f"Set the GC policy of experiment {args.experiment_id}: " + ", ".join(f"{k}={v}" for k, v in policy.items()))
    if deleted:
        print(f"Deleted {len(deleted)} checkpoint(s): " + ", ".join(deleted))
    return 0


def _action(name: str):
    def run(args: argparse.Namespace) -> int:
        experiment = _lookup.experiment(args)
        getattr(experiment, name)()
        exp = experiment.to_json()
        if name in ("archive", "unarchive"):
            print(f"Experiment {exp['id']} is {name}d")
        else:
            print(f"Experiment {exp['id']} is {exp['state']}")
        return 0

    return run


WAIT_EXIT_CODES = {"COMPLETED": 0, "ERROR": 1}
TERMINAL_STATES = ("COMPLETED", "CANCELED", "ERROR", "DELETED")


def wait(args: argparse.Namespace) -> int:
    """Poll until the experiment ends; exit 0 when COMPLETED, 1 on ERROR, 2 when CANCELED (or otherwise ended)."""
    if args.polling_interval <= 0:
        raise errors.DeterminedError(f"--polling-interval must be a positive number of seconds, not {args.polling_interval}")
    experiment = _lookup.experiment(args)
    while True:
        experiment.reload()
        exp = experiment.to_json()
        if exp["state"] in TERMINAL_STATES:
            print(f"Experiment {exp['id']} ended: {exp['state']}", flush=True)
            return WAIT_EXIT_CODES.get(exp["state"], 2)
        time.sleep(args.polling_interval)


def activate(args: argparse.Namespace) -> int:
    from determined.experimental import _run

    desc = _run.activate_experiment(args.experiment_id, master=args.master)
    return _run.exit_code_for(desc)


def add_parser(sub: argparse._SubParsersAction) -> None:
    from determined.cli import checkpoint, workspace

    p = sub.add_parser("experiment", aliases=["e"], help="manage experiments")
    s = p.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")

    c = s.add_parser("create", help="create an experiment (and, with no master configured, run it here)")
    c.add_argument("config_file", help="experiment config file (.yaml)")
    c.add_argument("model_def", nargs="?", default=None,
                   help="model definition directory (may be left out when the entrypoint needs no code)")
    c.add_argument("-i", "--include", action="append", default=None, metavar="PATH",
                   help="a file or directory to add at the top of the model definition (repeatable)")
    c.add_argument("-p", "--publish", action="append", default=None, metavar="PORT",
                   help="accepted for Determined 0.38 configs: trials run as processes of this machine, so the "
                        "ports they open are already the host's")
    c.add_argument("--local", action="store_true", help="run on this machine even if DET_MASTER is set")
    c.add_argument("-t", "--test-mode", "--test", dest="test_mode", action="store_true",
                   help="one batch, a full validation and a checkpoint (in-process with --local)")
    c.add_argument("--paused", action="store_true", help="create the experiment without starting it")
    c.add_argument("--cpu-slots", type=int, default=None, metavar="N",
                   help="CPU slots of the master this command starts on a machine without GPUs "
                        "(default: DET_CPU_SLOTS, else the number of cores)")
    c.add_argument("-d", "--detach", action="store_true",
                   help="create the experiment and return, leaving it to the running master (DET_MASTER, or the "
                        "one `det master up` runs on the data dir); with no master running, refused (without -d "
                        "the experiment runs here in the foreground)")
    workspace.add_create_arguments(c)
    c.add_argument("-f", "--follow-first-trial", action="store_true",
                   help="print the logs of the experiment's first trial as it runs (instead of the progress)")
    c.add_argument("--config", action="append", default=None, metavar="KEY=VALUE",
                   help="override a config field: a dotted path and a YAML value, e.g. "
                        "--config searcher.max_length.batches=100 (repeatable)")
    c.add_argument("--template", default=None, metavar="NAME",
                   help="a config template stored on the master (det template), merged under the config")
    c.set_defaults(func=create)

    ls = s.add_parser("list", aliases=["ls"], help="list experiments")
    ls.add_argument("-a", "--all", action="store_true", help="include archived experiments")
    ls.add_argument("--json", action="store_true")
    ls.add_argument("--csv", action="store_true")
    ls.add_argument("--show_project", "--show-project", dest="show_project", action="store_true",
                    help="include the workspace and project of each experiment")
    ls.set_defaults(func=list_experiments)

    cf = s.add_parser("config", help="print an experiment's config (YAML)")
    cf.add_argument("experiment_id", type=int)
    cf.set_defaults(func=show_config)

    md = s.add_parser("download-model-def", help="save an experiment's model definition as "
                                                  "experiment_ID_model_def.tgz")
    md.add_argument("experiment_id", type=int)
    md.add_argument("--output-dir", default=".", help="directory to save it in (default: the current one)")
    md.set_defaults(func=download_model_def)

    d = s.add_parser("describe", help="describe experiments")
    d.add_argument("experiment_ids", nargs="+", metavar="EXPERIMENT_IDS", help="ids: `1 2` or `1,2`")
    d.add_argument("--json", action="store_true")
    d.add_argument("--csv", action="store_true", help="the experiments, trials and workloads tables as CSV")
    d.add_argument("--outdir", default=None, metavar="DIR",
                   help="save experiments.csv, trials.csv and workloads.csv in DIR")
    d.add_argument("--metrics", action="store_true", help="also print every validation of every trial (with --csv: "
                                                          "the training metrics too)")
    d.set_defaults(func=describe)

    lt = s.add_parser("list-trials", aliases=["lt"], help="list the trials of an experiment")
    lt.add_argument("experiment_id", type=int)
    lt.add_argument("--json", action="store_true")
    lt.add_argument("--csv", action="store_true")
    lt.set_defaults(func=list_trials)

    lc = s.add_parser("list-checkpoints", aliases=["lc"], help="list the checkpoints of an experiment")
    lc.add_argument("experiment_id", type=int)
    lc.add_argument("--best", type=int, default=None, metavar="N",
                    help="only the N best checkpoints by the searcher metric, best first (validated checkpoints only; "
                         "several may come from one trial)")
    lc.add_argument("--json", action="store_true")
    lc.add_argument("--csv", action="store_true")
    lc.set_defaults(func=checkpoint.list_checkpoints)

    dl = s.add_parser("download", help="download the best checkpoints of an experiment (one per trial)")
    dl.add_argument("experiment_id", type=int)
    dl.add_argument("--top-n", type=int, default=1, metavar="N", help="the best checkpoints of the N best trials")
    dl.add_argument("-o", "--output-dir", default="checkpoints", help="directory for the checkpoints (each in UUID/)")
    dl.add_argument("--sort-by", default=None, metavar="METRIC", help="validation metric to rank by (default: searcher's)")
    dl.add_argument("--smaller-is-better", default=None, metavar="BOOL", help="true or false (with --sort-by)")
    dl.add_argument("-q", "--quiet", action="store_true", help="print only the local paths")
    dl.set_defaults(func=download)

    st = s.add_parser("set", help="change settings of an experiment")
    sts = st.add_subparsers(dest="setting", required=True, metavar="SETTING")
    gc = sts.add_parser("gc-policy", help="change which checkpoints GC keeps (shows what would be deleted)")
    gc.add_argument("experiment_id", type=int)
    gc.add_argument("--save-experiment-best", type=int, default=None, metavar="N")
    gc.add_argument("--save-trial-best", type=int, default=None, metavar="N")
    gc.add_argument("--save-trial-latest", type=int, default=None, metavar="N")
    gc.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    gc.set_defaults(func=set_gc_policy)

    a = s.add_parser("activate", aliases=["unpause"],
                     help="activate (resume) an experiment; with no master running, run it here")
    a.add_argument("experiment_id", type=int)
    a.set_defaults(func=activate)
    for name, help_text in (("pause", "pause an experiment (its trials checkpoint first)"),
                            ("cancel", "cancel an experiment (its trials checkpoint first)"),
                            ("kill", "kill an experiment's trials at once"),
                            ("archive", "archive an ended experiment (hidden from `list` unless --all)"),
                            ("unarchive", "unarchive an experiment")):
        x = s.add_parser(name, help=help_text)
        x.add_argument("experiment_id", type=int)
        x.set_defaults(func=_action(name))
    w = s.add_parser("wait", help="wait until an experiment ends; exit 0 COMPLETED, 1 ERROR, 2 CANCELED")
    w.add_argument("experiment_id", type=int)
    w.add_argument("--polling-interval", type=float, default=5.0, metavar="SECONDS", help="seconds between checks (default 5)")
    w.set_defaults(func=wait)
    workspace.add_move_parser(s)

    from determined.cli import experiment_edit

    experiment_edit.add_parsers(s, sts)
