"""Read commands on a data dir that no master runs on, answered from its SQLite file directly.

`det experiment list` used to start the whole server stack in-process (FastAPI, SQLAlchemy, migrations, a
login) to answer one query: seconds for a command that should feel instant. `LocalSession` answers the read
routes of the read table (views/read_table.py: experiments, trials, logs, checkpoints, models, workspaces,
projects, templates; the same entries the master serves as its GET routes, with the same parameters and answers)
over a read-only sqlite3 connection, and the master info of a data dir; everything else (writes, other routes)
goes to the in-process app, which it opens only then.

Reading the file needs no login: who can read the data dir's database can read everything in it anyway. A
command that names its user (`det -u USER`, `Determined(user=...)`) goes to the app, which authenticates it.
A database that is not SQLite, that does not exist yet, or whose schema is not the one this code knows
(migrations pending) is left to the in-process app, which creates or migrates it.
"""
import ast
import os
import pathlib
import sqlite3
from typing import Any, Dict, Optional, Tuple

import determined
from determined import errors
from determined.master.problems import RequestProblem
from determined.master.views import read_table
from determined.master.views.dbread import SqliteReader

MIGRATIONS = pathlib.Path(__file__).resolve().parent.parent / "migrations" / "versions"


def head_revision() -> Optional[str]:
    """The newest migration this code has (the schema a database must be at to be read directly); None when the
    migrations do not end in one head."""
    revisions, parents = set(), set()
    for path in MIGRATIONS.glob("*.py"):
        found: Dict[str, Any] = {}
        for node in ast.parse(path.read_text()).body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else getattr(node, "target", None)
            if isinstance(target, ast.Name) and target.id in ("revision", "down_revision") and node.value is not None:
                try:
                    found[target.id] = ast.literal_eval(node.value)
                except ValueError:
                    return None
        if isinstance(found.get("revision"), str):
            revisions.add(found["revision"])
            down = found.get("down_revision")
            parents.update([down] if isinstance(down, str) else list(down or ()))
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


def _database_path(data_dir: pathlib.Path) -> Optional[pathlib.Path]:
    url = os.environ.get("DET_DB_URL")
    if url:
        if not url.startswith("sqlite:///"):
            return None  # PostgreSQL: the in-process app reads it
        return pathlib.Path(url[len("sqlite:///"):])
    return data_dir / "determined.db"


def open_local(data_dir: "str | os.PathLike[str]") -> Optional["LocalSession"]:
    """A LocalSession on the data dir's database, or None when the in-process app must answer (see above)."""
    data_dir = pathlib.Path(data_dir)
    path = _database_path(data_dir)
    if path is None or not path.is_file():
        return None
    try:
        connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30, check_same_thread=False)
        row = connection.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.Error:
        return None
    if row is None or row[0] != head_revision():
        connection.close()
        return None
    return LocalSession(data_dir, connection)


class LocalSession:
    """What the CLI and the SDK need of a Session (`get`, `post`, `patch`, `delete`), reading locally."""

    def __init__(self, data_dir: pathlib.Path, connection: sqlite3.Connection) -> None:
        self.data_dir = data_dir.resolve()
        self.master = f"local:{self.data_dir}"
        self.reader = SqliteReader(connection)
        self._app_session: Optional[Any] = None

    def _app(self) -> Any:
        if self._app_session is None:
            from determined.master.embedded import in_process_session

            self._app_session = in_process_session(self.data_dir)
        return self._app_session

    def _read(self, path: str, params: Optional[Dict[str, Any]]) -> Tuple[bool, Any]:
        path = path[len("/api/v1"):] if path.startswith("/api/v1") else path
        if path == "/master/info":
            return True, {"version": determined.__version__, "data_dir": str(self.data_dir), "url": None, "slots": None,
                          "scheduler": False}
        found = read_table.match(path)
        if found is None:
            return False, None
        route, path_args = found
        try:
            return True, read_table.answer(self.reader, route, path_args, dict(params or {}))
        except RequestProblem as e:
            cls = errors.NotFoundError if e.status == 404 else errors.APIError
            raise cls(e.status, e.message, e.problems) from None

    def get(self, path: str, params: Optional[Dict[str, Any]] = None) -> Any:
        answered, answer = self._read(path, params)
        return answer if answered else self._app().get(path, params)

    def request(self, method: str, path: str, *, json: Any = None, params: Optional[Dict[str, Any]] = None) -> Any:
        if method.upper() == "GET":
            return self.get(path, params)
        return self._app().request(method, path, json=json, params=params)

    def post(self, path: str, json: Any = None) -> Any:
        return self._app().post(path, json)

    def patch(self, path: str, json: Any = None) -> Any:
        return self._app().patch(path, json)

    def delete(self, path: str) -> Any:
        return self._app().delete(path)

    def __getattr__(self, name: str) -> Any:
        # login, logout, username, token...: the in-process app's session has them
        return getattr(self._app(), name)

    def close(self) -> None:
        self.reader.connection.close()
        if self._app_session is not None:
            self._app_session.close()
