"""What the README says of the install and of the embedded run is true (issue 34): the base install carries what
`pip install determined` brought to trial code (`requests`: 0.16's official MNIST examples import it), and the
README names DET_DATA_DIR and how to reach the web UI of an embedded run."""
import pathlib
import re
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _dependencies() -> "list[str]":
    return list(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])


def test_the_base_install_carries_requests_as_determined_did() -> None:
    assert any(re.match(r"requests\b", d) for d in _dependencies()), _dependencies()
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "`requests`" in readme and "pip install determined" in readme


def test_the_readme_names_the_data_dir_variable_and_the_ui_of_an_embedded_run() -> None:
    readme = " ".join((ROOT / "README.md").read_text().split())
    assert "`DET_DATA_DIR`" in readme
    assert "Web UI:" in readme  # the line `det experiment create` prints at its start (determined/experimental/_run.py)
    assert "det master up --data-dir" in readme  # how to see the UI again after the run (its last lines)
    assert "no master is running to detach to" in readme  # -d without a master
