"""`det template ...`: config templates stored on the master, merged under an experiment's config
(`det experiment create --template NAME`)."""
import argparse
import sys
from typing import Any

from determined.cli import _render


def _templates(args: argparse.Namespace) -> Any:
    """The template functions of the client SDK on the command's master."""
    from determined.cli import _lookup

    return _lookup.templates(args)


def _read(path: str) -> str:
    from determined import config as det_config

    text = det_config.read_config_file(path, header="cannot read the template file")
    det_config.load_config_text(text, path, "cannot read the template file")  # a clear error before sending
    return str(text)


def create(args: argparse.Namespace) -> int:
    t = _templates(args).create_template(args.name, _read(args.template_file))
    print(f"Created template {t.name}")
    return 0


def set_config(args: argparse.Namespace) -> int:
    t = _templates(args).set_template(args.name, _read(args.template_file))
    print(f"Set the config of template {t.name}")
    return 0


def describe(args: argparse.Namespace) -> int:
    import yaml

    t = _templates(args).get_template(args.name)
    if args.json:
        _render.print_json(t.to_json())
    else:
        sys.stdout.write(yaml.safe_dump(t.config, sort_keys=False))
    return 0


def list_templates(args: argparse.Namespace) -> int:
    import yaml

    templates = _templates(args).list_templates()
    if args.json:
        _render.print_json([t.to_json() for t in templates])
        return 0
    rows = [[t.name, t.owner] + ([yaml.safe_dump(t.config, sort_keys=False, default_flow_style=True, width=10**6).strip()] if args.details else [])
            for t in templates]
    _render.table(["Name", "Owner"] + (["Config"] if args.details else []), rows,
                  empty="No templates yet. Create one with: det template create NAME FILE")
    return 0


def remove(args: argparse.Namespace) -> int:
    _templates(args).delete_template(args.name)
    print(f"Removed template {args.name}")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("template", aliases=["tpl"], help="manage config templates")
    s = p.add_subparsers(dest="subcommand", required=True, metavar="SUBCOMMAND")
    c = s.add_parser("create", help="store a config template (a YAML file of config fields)")
    c.add_argument("name")
    c.add_argument("template_file", metavar="FILE")
    c.set_defaults(func=create)
    sv = s.add_parser("set-value", help="replace a template's config: det template set-value config NAME FILE")
    sv.add_argument("field", choices=["config"])
    sv.add_argument("name")
    sv.add_argument("template_file", metavar="FILE")
    sv.set_defaults(func=set_config)
    st = s.add_parser("set", help="replace a template's config (deprecated: set-value config)")
    st.add_argument("name")
    st.add_argument("template_file", metavar="FILE")
    st.set_defaults(func=set_config)
    d = s.add_parser("describe", help="print a template's config")
    d.add_argument("name")
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=describe)
    ls = s.add_parser("list", aliases=["ls"], help="list the templates")
    ls.add_argument("-d", "--details", action="store_true", help="with each template's config")
    ls.add_argument("--json", action="store_true")
    ls.set_defaults(func=list_templates)
    rm = s.add_parser("remove", aliases=["rm"], help="remove a template")
    rm.add_argument("name")
    rm.set_defaults(func=remove)
