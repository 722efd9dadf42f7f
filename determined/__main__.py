from determined.cli.main import entry

entry()
