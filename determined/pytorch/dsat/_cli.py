"""The command line of `python3 -m determined.pytorch.dsat {binary,random,asha} CONFIG MODEL_DIR [options]`."""
import argparse

from determined.pytorch.dsat import _defaults

D = _defaults.AUTOTUNING_ARG_DEFAULTS


def get_base_parser() -> argparse.ArgumentParser:
    """The arguments every search method takes."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("config_path", help="experiment config file (.yaml)")
    p.add_argument("model_dir", help="file or directory containing model definition")
    p.add_argument("-i", "--include", type=str, nargs="+", help="additional files to copy into the model directory")
    p.add_argument("-mt", "--max-trials", type=int, default=D["max-trials"],
                   help="Maximum number of trials to run, including the model profile info trial")
    p.add_argument("-ms", "--max-slots", type=int, help="Maximum number of slots to use concurrently")
    p.add_argument("-mct", "--max-concurrent-trials", type=int, default=D["max-concurrent-trials"],
                   help="Maximum number of trials to run concurrently")
    p.add_argument("-m", "--metric", type=str, default=D["metric"],
                   choices=_defaults.SMALLER_IS_BETTER_METRICS + _defaults.LARGER_IS_BETTER_METRICS)
    p.add_argument("--run-full-experiment", action="store_true",
                   help="Run full-length experiment using best-found configuration after dsat completes")
    p.add_argument("-z", "--zero-stages", type=int, nargs="+", default=D["zero-stages"], choices=list(range(4)),
                   help="Space-separated list of zero stages to search over")
    p.add_argument("--start-profile-step", type=int, default=D["start-profile-step"],
                   help="Step on which to start profiling")
    p.add_argument("--end-profile-step", type=int, default=D["end-profile-step"],
                   help="Step on which to stop profiling")
    p.add_argument("-r", "--random-seed", type=int, default=D["random-seed"], help="Sets all random seeds")
    p.add_argument("--search-runner-config", type=str,
                   help="Path to an alternative search runner configuration file (accepted for Determined's "
                        "command line; here the search runs in this process, see docs/dsat.md)")
    p.add_argument("--max-search-runner-restarts", type=int, default=5,
                   help="Maximum search runner restarts (accepted for Determined's command line)")
    p.add_argument("--searcher-dir", type=str, default=None,
                   help="Directory keeping the search's state after every event; run the same command with it "
                        "again to resume an interrupted search (default: a new temporary directory)")
    return p


def get_full_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m determined.pytorch.dsat",
                                     description="DeepSpeed Autotune: find the fastest DeepSpeed config of a model")
    sub = parser.add_subparsers(required=True, dest="search_method")
    base = get_base_parser()
    fmt = argparse.ArgumentDefaultsHelpFormatter
    sub.add_parser("_test", parents=[base], formatter_class=fmt)
    random_p = sub.add_parser("random", parents=[base], formatter_class=fmt)
    random_p.add_argument("--trials-per-random-config", type=int, default=D["trials-per-random-config"],
                          help="Maximum number of trials to run per random config")
    random_p.add_argument("--early-stopping", type=int,
                          help="Terminates the search if a new best config not found in last `early-stopping` trials")
    range_help = "Expands the initial search range by a factor of `search-range-factor`"
    binary_p = sub.add_parser("binary", parents=[base], formatter_class=fmt)
    binary_p.add_argument("--search-range-factor", type=float, default=D["search-range-factor"], help=range_help)
    asha_p = sub.add_parser("asha", parents=[base], formatter_class=fmt)
    asha_p.add_argument("--max-rungs", type=int, default=D["max-rungs"],
                        help="Maximum rungs to use in the ASHA algorithm")
    asha_p.add_argument("--min-binary-search-trials", type=int, default=D["min-binary-search-trials"],
                        help="Minimum number of binary search trials to run per random configuration")
    asha_p.add_argument("--asha-early-stopping", type=int, default=D["asha-early-stopping"],
                        help="ASHA early stopping parameter (`s` in arxiv:1810.05934)")
    asha_p.add_argument("--divisor", type=int, default=D["divisor"],
                        help="ASHA divisor parameter (`eta` in arxiv:1810.05934)")
    asha_p.add_argument("--search-range-factor", type=float, default=D["search-range-factor"], help=range_help)
    return parser
