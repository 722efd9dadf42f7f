"""`det user ...` and `det -u USER` end to end on the local data dir (in-process master)."""
import os
import stat
import subprocess
import sys

from determined.common.api import _token_cache

from tests.client._cli import cli_fails, det, det_json
from tests.master._helpers import config


def test_user_commands_end_to_end(tmp_path) -> None:  # type: ignore[no-untyped-def]
    assert "You are logged in as user 'determined'." in det("user", "whoami", check=True).stdout
    assert [u["username"] for u in det_json("user", "list")] == ["admin", "determined"]
    cli_fails(det("user", "create", "alice"), "only an admin may create users")
    assert "Created user 'alice'" in det("-u", "admin", "user", "create", "alice", check=True).stdout
    det("-u", "admin", "user", "change-password", "alice", stdin="wonder\n", check=True)
    cli_fails(det("-u", "alice", "user", "whoami"), "det user login alice")
    cli_fails(det("user", "login", "alice", stdin="wrong\n"), "login failed")
    assert "Logged in as user 'alice'." in det("user", "login", "alice", stdin="wonder\n", check=True).stdout
    path = _token_cache.cache_path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and "wonder" not in path.read_text()
    assert "'alice'" in det("user", "whoami", check=True).stdout  # the last login is the default user

    # alice owns what she creates; determined cannot pause it, admin can
    cfg = tmp_path / "exp.yaml"
    import yaml

    cfg.write_text(yaml.safe_dump(config(max_trials=1)))
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.py").write_text("class T:\n    pass\n")
    det("experiment", "create", "--paused", str(cfg), str(model), check=True)
    cli_fails(det("-u", "determined", "experiment", "kill", "1"), "owned by 'alice'")
    det("-u", "admin", "experiment", "kill", "1", check=True)
    assert det_json("experiment", "describe", "1")["owner"] == "alice"

    det("-u", "admin", "user", "deactivate", "alice", check=True)
    cli_fails(det("user", "login", "alice", stdin="wonder\n"), "deactivated")
    det("-u", "admin", "user", "activate", "alice", check=True)
    det("user", "login", "alice", stdin="wonder\n", check=True)
    det("user", "change-password", stdin="better\n", check=True)  # own password: logged in again with it
    assert "'alice'" in det("user", "whoami", check=True).stdout
    assert "Logged out user 'alice'." in det("user", "logout", check=True).stdout
    assert "'determined'" in det("user", "whoami", check=True).stdout


def test_login_reads_the_password_from_a_pipe_in_a_real_process() -> None:
    det("-u", "admin", "user", "create", "bob", check=True)
    det("-u", "admin", "user", "change-password", "bob", stdin="pw-b\n", check=True)
    proc = subprocess.run([sys.executable, "-m", "determined.cli.main", "user", "login", "bob"], input="pw-b\n",
                          capture_output=True, text=True, timeout=120, env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    assert "'bob'" in det("user", "whoami", check=True).stdout


def test_det_u_is_for_one_command_even_when_it_changes_its_own_password() -> None:
    """The order of docs/auth.md: `det -u USER` never changes who plain `det` acts as; `det user login` does."""
    det("-u", "admin", "user", "change-password", "admin", stdin="adm-pw\n", check=True)
    assert "'determined'" in det("user", "whoami", check=True).stdout
    assert "'admin' (admin)" in det("-u", "admin", "user", "whoami", check=True).stdout  # logged in again, cached
    det("user", "login", "admin", stdin="adm-pw\n", check=True)
    det("user", "change-password", stdin="adm-pw2\n", check=True)  # plain: the default user's own password
    assert "'admin' (admin)" in det("user", "whoami", check=True).stdout
