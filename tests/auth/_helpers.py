"""Shared pieces of the auth tests: an in-process master app and sessions acting as given users."""
import pathlib
import warnings
from typing import Any, Dict, Optional

from determined.common.api import Session
from determined.master import create_app
from determined.master.master import Master

from tests.master._helpers import config, model_def

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


class InProcessMaster:
    """The master's app served in-process; `session(user, password)` logs in as that user."""

    def __init__(self, data_dir: pathlib.Path) -> None:
        self.app = create_app(data_dir, run_scheduler=False)
        self.master: Master = self.app.state.master

    def client(self) -> Any:
        return TestClient(self.app, base_url="http://in-process")

    def session(self, user: Optional[str] = None, password: str = "") -> Session:
        session = Session("http://in-process", client=self.client(), user=user)
        if user is not None:
            session.login(user, password, make_default=False)
        return session

    def raw(self, token: Optional[str] = None) -> Session:
        """A session that sends exactly `token` (or none) and never logs in by itself."""
        session = Session("http://in-process", token=token, client=self.client())
        session._token_source = "given"
        return session


def add_user(admin: Session, username: str, password: str = "", is_admin: bool = False) -> None:
    admin.post("/users", {"username": username, "password": password, "admin": is_admin})


def create_experiment(session: Session, max_trials: int = 2) -> Dict[str, Any]:
    body = {"config": config(max_trials=max_trials), "model_definition": model_def()}
    return session.post("/experiments", body)["experiment"]  # type: ignore[no-any-return]
