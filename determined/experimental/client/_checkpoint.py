"""Checkpoint: one stored checkpoint of a trial, to download and load."""
from __future__ import annotations

import io
import json
import logging
import os
import pathlib
import shutil
import sys
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional

from determined import errors
from determined.experimental.client import _ranking
from determined.experimental.client._common import MasterBound, UsageError, json_object, string_list
from determined.experimental.client._enums import CheckpointSortBy, CheckpointState, DownloadMode, OrderBy, state_of
from determined.experimental.client._enums import member as enum_member

if TYPE_CHECKING:  # the HTTP client is imported only where a session is opened
    from determined.common.api import Session

logger = logging.getLogger("determined.client")

METADATA_FILE = "metadata.json"
LOAD_DATA_FILE = "load_data.json"
CODE_DIR = "code"


class CheckpointTrainingMetadata:
    """Where a checkpoint came from (0.38's `Checkpoint.training`)."""

    def __init__(self, experiment_config: Dict[str, Any], experiment_id: int, trial_id: int,
                 hparams: Dict[str, Any], validation_metrics: Dict[str, Any]) -> None:
        self.experiment_config = experiment_config
        self.experiment_id = experiment_id
        self.trial_id = trial_id
        self.hparams = hparams
        self.validation_metrics = validation_metrics

    def __repr__(self) -> str:
        return f"CheckpointTrainingMetadata(experiment_id={self.experiment_id}, trial_id={self.trial_id})"


class Checkpoint(MasterBound):
    """A checkpoint of a trial: its files (download, load, delete) and its user metadata."""

    def __init__(
        self,
        uuid: str,
        experiment_config: Dict[str, Any],
        experiment_id: int,
        trial_id: int,
        hparams: Dict[str, Any],
        batch_number: int,
        start_time: str,
        end_time: str,
        resources: Dict[str, Any],
        validation: Dict[str, Any],
        determined_version: Optional[str] = None,
        framework: Optional[str] = None,
        format: Optional[str] = None,
        model_version: Optional[int] = None,
        model_name: Optional[str] = None,
        metadata: Optional[Dict[str, Any]] = None,
        master: Optional[str] = None,
        *,
        state: Optional[str] = None,
        storage: Optional[Dict[str, Any]] = None,
        _session: Optional[Session] = None,
    ) -> None:
        super().__init__(master, _session)
        self.uuid = uuid
        self.experiment_config = experiment_config
        self.experiment_id = experiment_id
        self.trial_id = trial_id
        self.hparams = hparams
        self.batch_number = batch_number
        self.start_time = start_time
        self.end_time = end_time
        self.resources = resources
        self.validation = validation
        self.determined_version = determined_version
        self.framework = framework
        self.format = format
        self.model_version = model_version
        self.model_name = model_name
        self.metadata = metadata if metadata is not None else {}
        self.state = state_of(CheckpointState, state) if state is not None else None
        self.storage = storage if storage is not None else (experiment_config or {}).get("checkpoint_storage")
        self._json: Optional[Dict[str, Any]] = None

    @property
    def report_time(self) -> Optional[str]:
        """When the checkpoint was reported (0.38's name of `end_time`)."""
        return self.end_time

    @property
    def task_id(self) -> str:
        return f"{self.experiment_id}.{self.trial_id}"

    @property
    def training(self) -> CheckpointTrainingMetadata:
        return CheckpointTrainingMetadata(self.experiment_config, self.experiment_id, self.trial_id, self.hparams,
                                          self.validation_metrics)

    def _refresh(self, data: Dict[str, Any]) -> None:
        self._json = dict(data)
        self.state = state_of(CheckpointState, data.get("state"))
        self.metadata = data.get("metadata") or {}
        self.resources = data.get("resources") or {}

    def reload(self) -> None:
        """Read the checkpoint's state, metadata and files again from the master."""
        self._refresh(self._session.get(f"/checkpoints/{self.uuid}")["checkpoint"])

    def to_json(self) -> Dict[str, Any]:
        """The master's record of the checkpoint as of the last read (read now if never): uuid, experiment_id,
        trial_id, steps_completed, state, resources, validation_metrics, metadata, model_versions, ..."""
        if self._json is None:
            self.reload()
        return dict(self._json or {})

    def write_metadata_file(self, path: str) -> None:
        """Write the checkpoint's metadata (framework, format, experiment, trial, hparams, user metadata) as JSON."""
        with open(path, "w") as f:
            json.dump(self._metadata_json(), f, indent=2, sort_keys=True, default=str)

    def delete(self) -> None:
        """Delete the checkpoint's files from storage; it stays listed, DELETED (not while a model version holds it)."""
        self._refresh(self._session.delete(f"/checkpoints/{self.uuid}")["checkpoint"])

    def remove_files(self, globs: List[str]) -> List[str]:
        """Delete the checkpoint's files matching any of `globs` (paths relative to the checkpoint, e.g. "*.pt");
        the checkpoint becomes PARTIALLY_DELETED (DELETED when no file is left). Returns the paths removed."""
        globs = string_list(globs, "globs")
        answer = self._session.post(f"/checkpoints/{self.uuid}/remove_files", {"globs": globs})
        self.reload()
        return list(answer.get("removed") or [])

    def get_metrics(self, group: Optional[str] = None) -> Iterator[Any]:
        """The metrics (`TrialMetrics`) reported by the trials that reported using this checkpoint
        (`core_context.experimental.report_task_using_checkpoint`, or `report_task_using_model_version` with a
        model version of it), trial by trial; `group`: only that group (default all). The metrics of the trial
        that wrote the checkpoint are its trial's (`Trial.iter_metrics`)."""
        from determined.experimental.client import _metrics

        return _metrics.linked_metrics(self._session, f"/checkpoints/{self.uuid}/metrics", group)

    @classmethod
    def _from_json(
        cls,
        data: Dict[str, Any],
        experiment_config: Dict[str, Any],
        session: Session,
        master: str = "",
        model_version: Optional[int] = None,
        model_name: Optional[str] = None,
    ) -> "Checkpoint":
        metrics = data.get("validation_metrics") or {}
        checkpoint = cls(
            data["uuid"],
            experiment_config,
            data["experiment_id"],
            data["trial_id"],
            data.get("hparams") or {},
            data.get("batch_number", data.get("steps_completed")),
            data.get("start_time"),
            data.get("end_time"),
            data.get("resources") or {},
            # Determined's shape: validation["metrics"]["validationMetrics"][name].
            {"metrics": {"validationMetrics": dict(metrics)}, "state": "COMPLETED" if metrics else None},
            determined_version=data.get("determined_version"),
            framework=data.get("framework"),
            format=data.get("format"),
            model_version=model_version,
            model_name=model_name,
            metadata=data.get("metadata") or {},
            master=master,
            state=data.get("state"),
            storage=data.get("storage"),
            _session=session,
        )
        checkpoint._json = dict(data)
        return checkpoint

    def __repr__(self) -> str:
        return f"Checkpoint(uuid={self.uuid!r}, trial_id={self.trial_id}, batch_number={self.batch_number})"

    @property
    def validation_metrics(self) -> Dict[str, Any]:
        """The validation metrics at this checkpoint's batch ({} when it was not validated)."""
        return dict(((self.validation or {}).get("metrics") or {}).get("validationMetrics") or {})

    def download(self, path: Optional[str] = None, mode: DownloadMode = DownloadMode.AUTO) -> str:
        """Download checkpoint to local storage.

        The files go to `path`, by default ``checkpoints/<uuid>`` under the current directory, with
        ``metadata.json`` and, when the checkpoint holds none, the experiment's model definition in ``code/``.
        A directory that already holds ``metadata.json`` is taken as downloaded. `mode`: DIRECT reads the
        checkpoint storage from this machine, MASTER has the master stream the files, AUTO (default) DIRECT when
        the storage's settings are known here (no hidden secrets) and readable, else MASTER.
        """
        mode = enum_member(DownloadMode, mode, "mode")
        local = pathlib.Path(path) if path is not None else pathlib.Path("checkpoints", self.uuid)
        if (local / METADATA_FILE).exists():
            return str(local)
        if self.state is not None and self.state not in ("COMPLETED", "PARTIALLY_DELETED"):
            raise errors.DeterminedError(
                f"checkpoint {self.uuid} is {_text(self.state)}: only COMPLETED (or PARTIALLY_DELETED) checkpoints "
                "have files to download"
            )
        from determined.config import redaction

        hidden = redaction.hidden_values(self.storage)
        if mode is DownloadMode.DIRECT and hidden:
            raise UsageError(f"checkpoint {self.uuid}: its storage's secrets are kept by the master, so this machine "
                             "cannot read the storage directly; use mode=DownloadMode.MASTER (or AUTO)")
        # Everything goes to a staging directory beside `local` and is moved into place at the end: processes that
        # download the same checkpoint to the same path at once (each rank of a trial, say) never read a file
        # another one is still writing.
        local.parent.mkdir(parents=True, exist_ok=True)
        staging = local.parent / f".{local.name}.download-{os.urandom(6).hex()}"
        staging.mkdir()
        try:
            self._download_into(staging, mode, hidden)
            _move_into_place(staging, local)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return str(local)

    def _download_into(self, local: pathlib.Path, mode: DownloadMode, hidden: Any) -> None:
        if mode is DownloadMode.MASTER or hidden:
            self._download_through_master(local)
        else:
            from determined.storage import build_storage_manager

            try:
                # the record's state was checked by download(): COMPLETED or PARTIALLY_DELETED. Links are kept only
                # when they stay inside the checkpoint; one leading out of it is left out, with a warning
                # (never copied as what it points at: determined.storage._safe_tree).
                build_storage_manager(self.storage).download(self.uuid, str(local), completed=True)
            except errors.DeterminedError:
                if mode is DownloadMode.DIRECT:
                    raise
                self._download_through_master(local)  # AUTO: storage not readable from here
        if not (local / CODE_DIR).exists():
            self._write_code(local)
        # Written last: its presence marks a complete download.
        with open(local / METADATA_FILE, "w") as f:
            json.dump(self._metadata_json(), f, indent=2, sort_keys=True, default=str)

    def _download_through_master(self, local: pathlib.Path) -> None:
        """The files as the master reads them from storage: clients do not get the storage's secrets. Links the
        master sends (only those that stay inside the checkpoint) are made as links; one that would lead out of
        `local` is left out, with a warning."""
        import tarfile  # only here: the read commands import this module too

        staging = pathlib.Path(_mkdtemp(prefix=".files-", dir=local))
        try:
            skipped: List[str] = []
            with tarfile.open(fileobj=_ChunkReader(self._session.stream(f"/checkpoints/{self.uuid}/files")),
                              mode="r|") as tar:
                for member in tar:
                    if not (member.isfile() or member.isdir() or member.issym()):
                        raise errors.DeterminedError(f"checkpoint {self.uuid}: the master sent {member.name!r}, "
                                                     "which is neither a file, a directory nor a link")
                    try:  # the "data" filter refuses a path or a link target outside `staging`, through links too
                        tar.extract(member, staging, set_attrs=False, filter="data")
                    except tarfile.FilterError:
                        if not member.issym():
                            raise
                        skipped.append(f"{member.name} -> {member.linkname}")
            if skipped:
                logger.warning("checkpoint %s: left out %s link(s) leading out of the checkpoint: %s", self.uuid,
                               len(skipped), ", ".join(skipped[:5]))
            for entry in staging.iterdir():
                os.replace(entry, local / entry.name)
        except tarfile.TarError as e:
            raise errors.DeterminedError(f"checkpoint {self.uuid}: the master's archive is damaged ({e}); "
                                         "download it again") from None
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def _metadata_json(self) -> Dict[str, Any]:
        return {
            "determined_version": self.determined_version,
            "framework": self.framework,
            "format": self.format,
            "experiment_id": self.experiment_id,
            "trial_id": self.trial_id,
            "hparams": self.hparams,
            "experiment_config": self.experiment_config,
            "metadata": self.metadata,
        }

    def _write_code(self, local: pathlib.Path) -> None:
        from determined.exec._model_def import extract_model_def

        b64 = self._session.get(f"/experiments/{self.experiment_id}/model_def")["b64_tgz"]
        staging = pathlib.Path(_mkdtemp(prefix=".code-", dir=local))
        try:
            extract_model_def(b64, str(staging))
            os.rename(staging, local / CODE_DIR)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise

    def load(self, path: Optional[str] = None, tags: Optional[List[str]] = None, **kwargs: Any) -> Any:
        """Load the checkpoint into memory, downloading it first when `path` holds no copy.

        PyTorch: the trial with its weights (the nn.Module for a 0.12-API trial); `kwargs` go to torch.load.
        """
        ckpt_dir = self.download(path)
        return Checkpoint.load_from_path(ckpt_dir, tags=tags, **kwargs)

    @staticmethod
    def load_from_path(path: str, tags: Optional[List[str]] = None, **kwargs: Any) -> Any:
        """Load a checkpoint from a local directory (as written by download()) into memory.

        PyTorch checkpoints give the trial instance with weights loaded (or the nn.Module of a 0.12-API
        trial); `kwargs` go to torch.load (e.g. map_location). The directory's ``code/`` is put on sys.path
        so that the trial class can be imported.
        """
        ckpt = pathlib.Path(path)
        if not ckpt.is_dir():
            raise errors.DeterminedError(f"checkpoint directory {path!r} does not exist; download the checkpoint first")
        framework = _framework_of(ckpt)
        if framework.startswith("torch"):
            code = ckpt / CODE_DIR
            if code.is_dir() and str(code.resolve()) not in sys.path:
                sys.path.insert(0, str(code.resolve()))
            try:
                from determined.pytorch._checkpoint import load_trial_from_checkpoint_path
            except ImportError as e:
                raise errors.DeterminedError(
                    f"checkpoint {path} was written by PyTorch ({framework}) but PyTorch cannot be imported here "
                    f"({e}); install it, e.g. pip install 'determined-revived[torch]'"
                ) from None
            return load_trial_from_checkpoint_path(str(ckpt), torch_load_kwargs=kwargs)
        if framework.startswith("tensorflow") and _checkpoint_format(ckpt) == "saved_model":
            # EstimatorTrial: the SavedModel exported into the checkpoint (kwargs: export_name=).
            try:
                from determined.estimator import load_estimator_from_checkpoint_path
            except ImportError as e:
                raise errors.DeterminedError(
                    f"checkpoint {path} was written by an EstimatorTrial ({framework}) but TensorFlow cannot be "
                    f"imported here ({e}); install it, e.g. pip install 'determined-revived[tensorflow]'"
                ) from None
            return load_estimator_from_checkpoint_path(str(ckpt), tags=tags, **kwargs)
        if framework.startswith("tensorflow") and _checkpoint_format(ckpt) in ("saved_weights", "h5"):
            # TFKerasTrial / Keras Native API: the compiled tf.keras model with its weights (kwargs go to
            # tf.keras.models.load_model for h5 checkpoints, e.g. custom_objects=).
            try:
                from determined.keras import load_model_from_checkpoint_path
            except ImportError as e:
                raise errors.DeterminedError(
                    f"checkpoint {path} was written by tf.keras ({framework}) but TensorFlow cannot be imported "
                    f"here ({e}); install it, e.g. pip install 'determined-revived[tensorflow]'"
                ) from None
            return load_model_from_checkpoint_path(str(ckpt), **kwargs)
        raise errors.DeterminedError(
            f"checkpoint {path} was written by {framework!r}: no loader knows that framework and format "
            "(PyTorch trials, tf.keras models and Estimator SavedModels can be loaded); read its files directly instead"
        )

    def add_metadata(self, metadata: Dict[str, Any]) -> None:
        """Add user metadata to the checkpoint; keys that exist already are replaced."""
        json_object(metadata, "metadata")
        answer = self._session.post(f"/checkpoints/{self.uuid}/metadata", {"metadata": metadata})
        self.metadata = answer["checkpoint"].get("metadata") or {}

    def remove_metadata(self, keys: List[str]) -> None:
        """Remove the given top-level keys from the checkpoint's user metadata (missing keys are ignored)."""
        keys = string_list(keys, "keys")
        answer = self._session.request("DELETE", f"/checkpoints/{self.uuid}/metadata", params={"keys": keys})
        self.metadata = answer["checkpoint"].get("metadata") or {}


def _move_into_place(staging: pathlib.Path, local: pathlib.Path) -> None:
    """Move a complete download from `staging` to `local`: in one rename when `local` is absent or empty; when
    another process finished the same download first, its copy stays; into an existing directory of other files
    entry by entry, `metadata.json` (the mark of a complete download) last."""
    try:
        os.rename(staging, local)
        return
    except OSError:
        if (local / METADATA_FILE).exists():
            return
    for entry in sorted(staging.iterdir(), key=lambda e: e.name == METADATA_FILE):
        target = local / entry.name
        if entry.is_dir() and target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(entry, target)


def _text(state: Any) -> str:
    return str(getattr(state, "value", state))


def _framework_of(ckpt: pathlib.Path) -> str:
    for name in (METADATA_FILE, LOAD_DATA_FILE):
        file = ckpt / name
        if file.is_file():
            try:
                data = json.loads(file.read_text())
            except ValueError as e:
                raise errors.DeterminedError(f"{file} is not valid JSON ({e}); download the checkpoint again") from None
            framework = data.get("framework") if isinstance(data, dict) else None
            if framework:
                return str(framework)
    if any((ckpt / n).is_file() for n in ("state_dict.pth", "determined/state_dict.pth", "pedl/state_dict.pth",
                                           "checkpoint.pt")):
        return "torch"
    raise errors.DeterminedError(
        f"{ckpt} holds no {METADATA_FILE} or {LOAD_DATA_FILE} naming its framework: it is not a checkpoint "
        "directory written by Checkpoint.download() or a trial"
    )


def _checkpoint_format(ckpt: pathlib.Path) -> str:
    """The `format` recorded in the checkpoint's metadata.json or load_data.json ("" when none says)."""
    for name in (METADATA_FILE, LOAD_DATA_FILE):
        try:
            data = json.loads((ckpt / name).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("format"):
            return str(data["format"])
    return ""


class _ChunkReader(io.RawIOBase):
    """A readable file over an iterator of byte chunks (a streamed HTTP body)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._pending = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            try:
                self._pending = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def sorted_checkpoints(connection: Any, master: str, checkpoints: List[Dict[str, Any]], config: Dict[str, Any],
                       sort_by: Any, order_by: Any, max_results: Optional[int]) -> List[Checkpoint]:
    """COMPLETED `checkpoints` sorted as Experiment/Trial.list_checkpoints say."""
    if (sort_by is None) != (order_by is None):
        raise UsageError("list_checkpoints() takes sort_by and order_by together, or neither (the searcher's metric "
                         "and direction)")
    if max_results is not None and (isinstance(max_results, bool) or not isinstance(max_results, int)
                                    or max_results < 1):
        raise UsageError(f"max_results must be a positive integer, not {max_results!r}")
    completed = [c for c in checkpoints if c.get("state") == "COMPLETED"]
    searcher = config.get("searcher") or {}
    if sort_by is None or (isinstance(sort_by, CheckpointSortBy) and sort_by is CheckpointSortBy.SEARCHER_METRIC):
        metric = str(searcher.get("metric"))
        sib = bool(searcher.get("smaller_is_better", True))
        if order_by is not None:
            sib = enum_member(OrderBy, order_by, "order_by") is OrderBy.ASCENDING
        ordered = _by_metric(completed, metric, sib)
    elif isinstance(sort_by, CheckpointSortBy):
        descending = enum_member(OrderBy, order_by, "order_by") is OrderBy.DESCENDING
        key = sort_by.value
        ordered = sorted(completed, key=lambda c: (c.get(key) is None, c.get(key) or 0, c["uuid"]), reverse=descending)
    elif isinstance(sort_by, str) and sort_by:
        ordered = _by_metric(completed, sort_by, enum_member(OrderBy, order_by, "order_by") is OrderBy.ASCENDING)
    else:
        raise UsageError(f"sort_by must be a CheckpointSortBy or a validation metric's name, not {sort_by!r}")
    return [Checkpoint._from_json(c, config, connection, master) for c in ordered[:max_results]]


def _by_metric(checkpoints: List[Dict[str, Any]], metric: str, ascending: bool) -> List[Dict[str, Any]]:
    """Checkpoints with the metric first (best first by `ascending`), then the others; ties in the one order of
    determined.common.checkpoint_order (more batches first, then the lower trial id, then the uuid)."""
    return sorted(checkpoints, key=lambda c: _ranking.key(c, metric, ascending))


def _mkdtemp(prefix: str, dir: pathlib.Path) -> str:
    import tempfile  # only here: the read commands import this module too

    return tempfile.mkdtemp(prefix=prefix, dir=dir)
