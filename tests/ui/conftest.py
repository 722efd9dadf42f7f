"""A master on 127.0.0.1 running trials of tests/ui/core_trial.py: a finished ASHA experiment and a running one;
and headless Chromium for the browser tests."""
import os
import pathlib
import sys
import time
from typing import Any, Dict, Iterator

import httpx
import pytest

from determined.master import embedded
from determined.master.rm import Slots
from tests import _patience
from tests.master._helpers import model_def

HERE = pathlib.Path(__file__).resolve().parent
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync"]
TERMINAL = {"COMPLETED", "CANCELED", "ERROR"}


class Api:
    """The master's REST API as a user with a blank password (`determined` unless told)."""

    def __init__(self, url: str, username: str = "determined") -> None:
        self.url = url
        self.client = httpx.Client(base_url=url + "/api/v1", timeout=30)
        self.login(username, "")

    def login(self, username: str, password: str) -> None:
        resp = self.client.post("/auth/login", json={"username": username, "password": password})
        assert resp.status_code == 200, resp.text
        self.client.headers["Authorization"] = f"Bearer {resp.json()['token']}"

    def get(self, path: str, **params: Any) -> Any:
        resp = self.client.get(path, params=params)
        assert resp.status_code == 200, resp.text
        return resp.json()

    def post(self, path: str, body: Any = None) -> Any:
        resp = self.client.post(path, json=body if body is not None else {})
        assert resp.status_code == 200, resp.text
        return resp.json()

    def patch(self, path: str, body: Any) -> Any:
        resp = self.client.patch(path, json=body)
        assert resp.status_code == 200, resp.text
        return resp.json()

    def wait(self, predicate: Any, timeout: float, what: str) -> Any:
        """Poll `predicate()` until true; fail after `timeout` s x the machine's load factor (tests/_patience.py)."""
        return _patience.wait_for(predicate, timeout, what, interval=0.3)


def asha_config() -> Dict[str, Any]:
    return {
        "description": "ui asha",
        "entrypoint": "model:T",
        "labels": ["ui-test"],
        "searcher": {"name": "adaptive_asha", "metric": "validation_loss", "max_length": {"batches": 16},
                     "max_trials": 6, "divisor": 2, "max_rungs": 3, "mode": "aggressive"},
        "hyperparameters": {"global_batch_size": 1, "x": {"type": "double", "minval": 0, "maxval": 1},
                            "extra": {"noise": {"type": "double", "minval": 0, "maxval": 1}},  # nested: extra.noise
                            "lr": {"type": "log", "minval": -4, "maxval": -1},
                            "batch": {"type": "categorical", "vals": [20, 30, 40]},
                            "sleep": 0.01, "report_every": 2},
        "max_restarts": 1,
    }


def running_config() -> Dict[str, Any]:
    return {
        "description": "ui running",
        "entrypoint": "model:T",
        "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": 100000}},
        "hyperparameters": {"global_batch_size": 1, "x": 0.5, "noise": 0.0, "sleep": 0.15, "report_every": 2},
        "max_restarts": 1,
    }


@pytest.fixture(scope="session")
def ui_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Any]]:
    """The master, its Api, and the ids of a finished ASHA experiment (`asha`) and a running one (`running`),
    shared by the UI and TensorBoard tests (a test that sets a password puts the blank one back)."""
    data_dir = tmp_path_factory.mktemp("ui-master")
    master = embedded.start(data_dir, slots=Slots(gpus=[], cpu_count=4), preemption_timeout=20,
                            trial_command=[sys.executable, str(HERE / "core_trial.py")])
    try:
        api = Api(master.url)
        asha = api.post("/experiments", {"config": asha_config(), "model_definition": model_def()})["experiment"]["id"]
        running = api.post("/experiments", {"config": running_config(), "model_definition": model_def()})["experiment"]["id"]
        api.wait(lambda: api.get(f"/experiments/{asha}")["experiment"]["state"] in TERMINAL, 150, "the ASHA experiment")
        assert api.get(f"/experiments/{asha}")["experiment"]["state"] == "COMPLETED"
        yield {"master": master, "api": api, "url": master.url, "asha": asha, "running": running, "data_dir": data_dir}
    finally:
        master.stop(timeout=20)


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    deadline = time.monotonic() + 300
    while not os.path.exists(CHROMIUM):  # apt may still be installing it
        if time.monotonic() > deadline:
            pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium package")
        time.sleep(5)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="session")
def artifacts() -> pathlib.Path:
    path = pathlib.Path(os.environ.get("DET_TEST_ARTIFACTS") or HERE / "artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="session")
def shared_context(browser: Any) -> Iterator[Any]:
    """One browser context for the page tests (plotly.js is fetched once; the token stays in localStorage)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        yield context
    finally:
        context.close()
