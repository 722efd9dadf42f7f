"""`det preview-search CONFIG_FILE`: what a search will do, from the config alone (needs no master)."""
import argparse

from determined import errors
from determined.cli import _render


def preview_search(args: argparse.Namespace) -> int:
    from determined import config as det_config
    from determined.searcher import format_preview, preview

    canonical = det_config.load_experiment_config(det_config.load_config_file(args.config_file))
    try:
        data = preview(canonical)
    except ValueError as e:  # a searcher the config allows but that cannot run, e.g. more brackets than trials
        raise errors.DeterminedError(f"cannot preview the search of {args.config_file}: {e}") from None
    if args.json:
        _render.print_json(data)
    else:
        print(format_preview(data))
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("preview-search", help="show the trials, brackets and lengths a config's search will use")
    p.add_argument("config_file", help="experiment config file (YAML)")
    p.add_argument("--json", action="store_true", help="print the preview as JSON")
    p.set_defaults(func=preview_search)
