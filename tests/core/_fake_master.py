"""A tiny master that implements only the trial routes of docs/internals.md, for harness tests."""
import base64
import io
import pathlib
import socket
import tarfile
import threading
import time
from typing import Any, Dict, List, Optional

import fastapi
import uvicorn

TOKEN = "secret-token"


def pack_dir(root: pathlib.Path) -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(root.rglob("*")):
            tar.add(str(path), arcname=path.relative_to(root).as_posix(), recursive=False)
    return base64.b64encode(buf.getvalue()).decode()


class FakeMaster:
    def __init__(self, *, config: Dict[str, Any], hparams: Dict[str, Any], model_dir: pathlib.Path) -> None:
        self.config = config
        self.hparams = hparams
        self.model_b64 = pack_dir(model_dir)
        self.ops: List[Dict[str, Any]] = []
        self.latest_checkpoint: Optional[Dict[str, Any]] = None
        self.preempt = False
        self.preempt_on_training_metrics = False
        self.training: List[Dict[str, Any]] = []
        self.validation: List[Dict[str, Any]] = []
        self.checkpoints: List[Dict[str, Any]] = []
        self.completed: List[Dict[str, Any]] = []
        self.early_exits: List[Dict[str, Any]] = []
        self.bad_auth = 0
        self.preemption_polls = 0
        self.context_requests = 0
        self.app = self._build_app()
        self._server: Optional[uvicorn.Server] = None
        self._thread: Optional[threading.Thread] = None
        self.url = ""

    def _build_app(self) -> fastapi.FastAPI:
        app = fastapi.FastAPI()
        master = self

        @app.middleware("http")
        async def check_token(request: fastapi.Request, call_next: Any) -> Any:
            if request.headers.get("authorization") != f"Bearer {TOKEN}":
                master.bad_auth += 1
                return fastapi.responses.JSONResponse({"detail": "bad token"}, status_code=401)
            return await call_next(request)

        @app.get("/api/v1/trials/{trial_id}/context")
        def context(trial_id: int) -> Dict[str, Any]:
            master.context_requests += 1
            return {
                "trial_id": trial_id, "experiment_id": 5, "config": master.config, "hparams": master.hparams,
                "trial_seed": 1234, "latest_checkpoint": master.latest_checkpoint,
                "steps_completed": (master.latest_checkpoint or {}).get("steps_completed", 0),
            }

        @app.get("/api/v1/experiments/{experiment_id}/model_def")
        def model_def(experiment_id: int) -> Dict[str, Any]:
            assert experiment_id == 5
            return {"b64_tgz": master.model_b64}

        @app.get("/api/v1/trials/{trial_id}/searcher/operation")
        def operation(trial_id: int) -> Dict[str, Any]:
            if not master.ops:
                return {"completed": True}
            return master.ops.pop(0)

        @app.post("/api/v1/trials/{trial_id}/searcher/completed_operation")
        def completed(trial_id: int, body: Dict[str, Any]) -> Dict[str, Any]:
            master.completed.append(body)
            return {}

        @app.post("/api/v1/trials/{trial_id}/training_metrics")
        def training(trial_id: int, body: Dict[str, Any]) -> Dict[str, Any]:
            master.training.append(body)
            if master.preempt_on_training_metrics:
                master.preempt = True
            return {}

        @app.post("/api/v1/trials/{trial_id}/validation_metrics")
        def validation(trial_id: int, body: Dict[str, Any]) -> Dict[str, Any]:
            metric = master.config["searcher"]["metric"]
            if metric not in body["metrics"]:
                raise fastapi.HTTPException(400, f"searcher metric {metric!r} missing")
            values = [v["metrics"][metric] for v in master.validation]
            master.validation.append(body)
            return {"is_best": all(body["metrics"][metric] < v for v in values)}

        @app.post("/api/v1/trials/{trial_id}/checkpoints")
        def checkpoint(trial_id: int, body: Dict[str, Any]) -> Dict[str, Any]:
            master.checkpoints.append(body)
            return {}

        @app.post("/api/v1/trials/{trial_id}/early_exit")
        def early_exit(trial_id: int, body: Dict[str, Any]) -> Dict[str, Any]:
            master.early_exits.append(body)
            return {}

        @app.get("/api/v1/allocations/{allocation_id}/signals/preemption")
        def preemption(allocation_id: str) -> Dict[str, Any]:
            master.preemption_polls += 1
            return {"preempt": master.preempt}

        return app

    def start(self) -> "FakeMaster":
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(self.app, log_level="warning", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("fake master did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
