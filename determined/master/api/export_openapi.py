"""`python -m determined.master.api.export_openapi [PATH]`: the master's OpenAPI document, as checked into the
repository at docs/openapi.json (a test keeps the two equal: regenerate it after changing a route or a model)."""
import sys
import tempfile


def main(argv: "list[str]") -> int:
    from determined.master import create_app
    from determined.master.api import contract

    with tempfile.TemporaryDirectory() as data_dir:
        text = contract.document(create_app(data_dir, run_scheduler=False))
    if argv:
        with open(argv[0], "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
