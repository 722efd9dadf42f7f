"""Shared helpers of the master tests: configs, model-definition archives."""
import base64
import gzip
import io
import tarfile
from typing import Any, Callable, Dict, Optional


def pass_fake_settings_to_trials(monkeypatch: Any) -> None:
    """Trials get an allow-list of the master's environment: let the fake trial's FAKE_* settings through."""
    from determined.master.rm import trial_env

    monkeypatch.setattr(trial_env, "PASSED_PREFIXES", (*trial_env.PASSED_PREFIXES, "FAKE_"))


def model_def(files: Optional[Dict[str, str]] = None) -> str:
    files = files if files is not None else {"model.py": "class T:\n    pass\n"}
    buf = io.BytesIO()
    # A fixed gzip mtime: the same files always give the same bytes (tests compare them).
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buf.getvalue()).decode()


def config(max_trials: int = 2, length: int = 30, **extra: Any) -> Dict[str, Any]:
    searcher = {"name": "random", "metric": "loss", "max_length": {"batches": length}, "max_trials": max_trials}
    searcher.update(extra.pop("searcher", {}))
    cfg: Dict[str, Any] = {
        "entrypoint": "model:T",
        "searcher": searcher,
        "hyperparameters": {"global_batch_size": 4, "x": {"type": "double", "minval": 0, "maxval": 1}},
        "max_restarts": 2,
    }
    cfg.update(extra)
    return cfg


def wait_for(what: Callable[[], Any], timeout: float = 30.0, message: str = "") -> Any:
    """Poll `what()` until it returns something true (returned); fail after `timeout` seconds x the machine's load
    factor (tests/_patience.py)."""
    from tests import _patience

    return _patience.wait_for(what, timeout, message or str(what), interval=0.05)
