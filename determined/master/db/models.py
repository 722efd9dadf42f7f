"""SQLAlchemy models of the master's database (the schema built by migrations/versions/)."""
import datetime
from typing import Any, Optional

from sqlalchemy import (JSON, BigInteger, Boolean, DateTime, Float, ForeignKey, Index, Integer, LargeBinary, String,
                        Text, UniqueConstraint)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


class Base(DeclarativeBase):
    pass


class Experiment(Base):
    __tablename__ = "experiments"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    state: Mapped[str] = mapped_column(String(32), index=True)
    config: Mapped[Any] = mapped_column(JSON)
    model_def: Mapped[bytes] = mapped_column(LargeBinary)
    owner: Mapped[str] = mapped_column(String(128), default="determined")
    owner_id: Mapped[Optional[int]] = mapped_column(ForeignKey("users.id"), nullable=True)
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    searcher_snapshot: Mapped[Optional[Any]] = mapped_column(JSON, nullable=True)
    searcher_shutdown: Mapped[bool] = mapped_column(Boolean, default=False)
    searcher_failure: Mapped[bool] = mapped_column(Boolean, default=False)
    progress: Mapped[float] = mapped_column(Float, default=0.0)
    best_validation: Mapped[Optional[float]] = mapped_column(Float, nullable=True)
    best_trial_id: Mapped[Optional[int]] = mapped_column(Integer, nullable=True)
    start_time: Mapped[datetime.datetime] = mapped_column(DateTime, default=utcnow)
    end_time: Mapped[Optional[datetime.datetime]] = mapped_column(DateTime, nullable=True)
    # True once checkpoint GC has run for the experiment's end; NULL/False while it is due (or not yet ended).
    checkpoint_gc_done: Mapped[Optional[bool]] = mapped_column(Boolean, nullable=True, default=False)
    # the project it belongs to (migration 0008 put older experiments into the default project, id 1)
    project_id: Mapped[Optional[int]] = mapped_column(ForeignKey("projects.id"), nullable=True, index=True, default=1)
    notes: Mapped[Optional[str]] = mapped_column(Text, nullable=True)  # the SDK's set_notes (0.38)
    # An unmanaged experiment (0.38's core_v2): its trials are scripts run outside the platform, never scheduled;
    # `external_experiment_id` (unique) lets a later run reuse it (migration 0010).
    unmanaged: Mapped[Optional[bool]] = mapped_column(Boolean, nullable=True, default=False)
    external_experiment_id: Mapped[Optional[str]] = mapped_column(String(256), nullable=True, unique=True,
                                                                  index=True)


class Trial(Base):
    __tablename__ = "trials"
    # the search method names its trials by request id: found without reading the experiment's other trials;
    # an experiment's open trials (states.TRIAL_OPEN) are found without reading its ended ones
    __table_args__ = (Index("ix_trials_experiment_id_request_id", "experiment_id", "request_id"),
                      Index("ix_trials_experiment_id_state", "experiment_id", "state"))

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id"), index=True)
    request_id: Mapped[str] = mapped_column(String(64))
    hparams: Mapped[Any] = mapped_column(JSON)
    seed: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(32), index=True)
    restarts: Mapped[int] = mapped_column(Integer, default=0)
    total_batches: Mapped[int] = mapped_column(Integer, default=0)
    runs: Mapped[int] = mapped_column(Integer, default=0)
    allocation_id: Mapped[Optional[str]] = mapped_column(String(64), nullable=True, index=True)
    session_token: Mapped[Optional[str]] = mapped_column(String(128), nullable=True, index=True)
    preempt_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    close_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    early_exit_reason: Mapped[Optional[str]] = mapped_column(String(32), nullable=True)
    warm_start_checkpoint_uuid: Mapped[Optional[str]] = mapped_column(String(64), nullable=True)
    latest_checkpoint_uuid: Mapped[Optional[str]] = mapped_column(String(64), nullable=True)
    best_validation: Mapped[Optional[float]] = mapped_column(Float, nullable=True)
    latest_validation: Mapped[Optional[Any]] = mapped_column(JSON, nullable=True)
    start_time: Mapped[datetime.datetime] = mapped_column(DateTime, default=utcnow)
    end_time: Mapped[Optional[datetime.datetime]] = mapped_column(DateTime, nullable=True)
    # [{"name", "action", "allocation_id", "line"}]: the first match of each log policy in each run (log_policies)
    log_policy_matches: Mapped[Optional[Any]] = mapped_column(JSON, nullable=True)
    # Core API (0.38): the current run acknowledged the preemption signal (its exit 0 means "resume me later");
    # the status text it set (`set_status`); the metadata it keeps (`set_metadata`, survives restarts).
    preempt_acked: Mapped[Optional[bool]] = mapped_column(Boolean, nullable=True, default=False)
    runner_status: Mapped[Optional[str]] = mapped_column(Text, nullable=True)
    run_metadata: Mapped[Optional[Any]] = mapped_column(JSON, nullable=True)
    # the id an unmanaged run gave this trial (unique within its experiment): a later run with it continues it
    external_trial_id: Mapped[Optional[str]] = mapped_column(String(256), nullable=True)
    # increased with every change to its training or validation metrics: a kept learning curve (TrialCurve) of
    # another version is out of date (migration 0011)
    metrics_version: Mapped[Optional[int]] = mapped_column(Integer, nullable=True, default=0)


class SearcherOperation(Base):
    """A `ValidateAfter` queued for a trial: `length` in the searcher's unit, `length_batches` what the trial sees."""

    __tablename__ = "searcher_operations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id"), index=True)
    length: Mapped[int] = mapped_column(Integer)
    length_batches: Mapped[int] = mapped_column(Integer)
    completed: Mapped[bool] = mapped_column(Boolean, default=False)


class SearcherEvent(Base):
    """The journal of events fed to an experiment's search method and the operations it answered."""

    __tablename__ = "searcher_events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id"), index=True)
    event: Mapped[Any] = mapped_column(JSON)
    operations: Mapped[Any] = mapped_column(JSON)
    time: Mapped[datetime.datetime] = mapped_column(DateTime, default=utcnow)


class TrainingMetrics(Base):
    __tablename__ = "training_metrics"
    __table_args__ = (Index("ix_training_metrics_trial_id_steps_completed", "trial_id", "steps_completed"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id"))
    steps_completed: Mapped[int] = mapped_column(Integer)
    metrics: Mapped[Any] = mapped_column(JSON)
    batch_metrics: Mapped[Any] = mapped_column(JSON)
    end_time: Mapped[datetime.datetime] = mapped_column(DateTime, default=utcnow)


class ValidationMetrics(Base):
    __tablename__ = "validation_metrics"
    __table_args__ = (Index("ix_validation_metrics_trial_id_steps_completed", "trial_id", "steps_completed"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id"))
    steps_completed: Mapped[int] = mapped_column(Integer)
    metrics: Mapped[Any] = mapped_column(JSON)
    end_time: Mapped[datetime.datetime] = mapped_column(DateTime, default=utcnow)


class TrialCurve(Base):
    """A trial's learning curve of one group downsampled to `max_points` per metric (determined/master/insights/curves.py),
    as the experiment's metrics route sends it: valid while the trial's `metrics_version` is `version`."""

    __tablename__ = "trial_curves"

    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id"), primary_key=True)
    group_name: Mapped[str] = mapped_column(String(32), primary_key=True)
    max_points: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[int] = mapped_column(Integer)
    points: Mapped[str] = mapped_column(Text)  # JSON text of the points
    names: Mapped[str] = mapped_column(Text)  # JSON text: the names of their numeric metrics


class GroupMetrics(Base):
    """Metrics of a group other than `training` and `validation` (`report_metrics(group, ...)`, the profiler's)."""

    __tablename__ = "group_metrics"
    __table_args__ = (Index("ix_group_metrics_trial_id_group_steps", "trial_id", "group_name", "steps_completed"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id"))
    group_name: Mapped[str] = mapped_column(String(128))
    steps_completed: Mapped[int] = mapped_column(Integer)
    metrics: Mapped[Any] = mapped_column(JSON)
    end_time: Mapped[datetime.datetime] = mapped_column(DateTime, default=utcnow)


class Checkpoint(Base):
    __tablename__ = "checkpoints"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    uuid: Mapped[str] = mapped_column(String(64), unique=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id"), index=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id"), index=True)
    state: Mapped[str] = mapped_column(String(32))
    steps_completed: Mapped[int] = mapped_column(Integer)
    resources: Mapped[Any] = mapped_column(JSON)
    framework: Mapped[str] = mapped_column(String(128), default="")
    format: Mapped[str] = mapped_column(String(128), default="")
    metadata_: Mapped[Any] = mapped_column("metadata", JSON)
    determined_version: Mapped[str] = mapped_column(String(64))
    start_time: Mapped[datetime.datetime] = mapped_column(DateTime, default=utcnow)
    end_time: Mapped[datetime.datetime] = mapped_column(DateTime, default=utcnow)


class TrialLog(Base):
    __tablename__ = "trial_logs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id"), index=True)
    timestamp: Mapped[datetime.datetime] = mapped_column(DateTime)
    stream: Mapped[str] = mapped_column(String(16))
    message: Mapped[str] = mapped_column(Text)


class Model(Base):
    """A named entry of the model registry."""

    __tablename__ = "models"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(256), unique=True)
    description: Mapped[str] = mapped_column(Text, default="")
    metadata_: Mapped[Any] = mapped_column("metadata", JSON)
    creation_time: Mapped[datetime.datetime] = mapped_column(DateTime, default=utcnow)
    last_updated_time: Mapped[datetime.datetime] = mapped_column(DateTime, default=utcnow)
    # who may change it besides admins (migration 0005 gave older models to the admin)
    owner: Mapped[str] = mapped_column(String(128), default="")
    owner_id: Mapped[Optional[int]] = mapped_column(ForeignKey("users.id"), nullable=True)
    # the workspace it belongs to (migration 0008 put older models into the default workspace, id 1)
    workspace_id: Mapped[Optional[int]] = mapped_column(ForeignKey("workspaces.id"), nullable=True, index=True,
                                                        default=1)
    labels: Mapped[Optional[Any]] = mapped_column(JSON, nullable=True)  # 0.38: a list of strings
    archived: Mapped[Optional[bool]] = mapped_column(Boolean, nullable=True, default=False)


class ModelVersion(Base):
    """Version `version` (1, 2, ... per model) of a registered model: one checkpoint."""

    __tablename__ = "model_versions"
    __table_args__ = (UniqueConstraint("model_id", "version", name="uq_model_versions_model_id_version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    model_id: Mapped[int] = mapped_column(ForeignKey("models.id"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    checkpoint_uuid: Mapped[str] = mapped_column(ForeignKey("checkpoints.uuid"), index=True)
    creation_time: Mapped[datetime.datetime] = mapped_column(DateTime, default=utcnow)
    name: Mapped[Optional[str]] = mapped_column(String(256), nullable=True)  # 0.38's set_name, comment, set_notes
    comment: Mapped[Optional[str]] = mapped_column(Text, nullable=True)
    notes: Mapped[Optional[str]] = mapped_column(Text, nullable=True)
    metadata_: Mapped[Optional[Any]] = mapped_column("metadata", JSON, nullable=True)


class TrialSourceInfo(Base):
    """A trial reported that it used a checkpoint (`report_task_using_checkpoint`), or a model version and its
    checkpoint (`report_task_using_model_version`): its metrics are then read through them (migration 0012).
    `kind` is INFERENCE or FINE_TUNING; a deleted model version leaves the link to its checkpoint."""

    __tablename__ = "trial_source_infos"
    __table_args__ = (UniqueConstraint("trial_id", "checkpoint_uuid", "model_version_id", "kind",
                                       name="uq_trial_source_infos_link"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trial_id: Mapped[int] = mapped_column(ForeignKey("trials.id"), index=True)
    checkpoint_uuid: Mapped[str] = mapped_column(ForeignKey("checkpoints.uuid"), index=True)
    model_version_id: Mapped[Optional[int]] = mapped_column(ForeignKey("model_versions.id"), nullable=True,
                                                            index=True)
    kind: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime, default=utcnow)


class ConfigTemplate(Base):
    """A named config template (`det template`): merged under the config of an experiment created with it."""

    __tablename__ = "config_templates"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(256), unique=True)
    config: Mapped[Any] = mapped_column(JSON)
    owner: Mapped[str] = mapped_column(String(128), default="")
    owner_id: Mapped[Optional[int]] = mapped_column(ForeignKey("users.id"), nullable=True)
    creation_time: Mapped[datetime.datetime] = mapped_column(DateTime, default=utcnow)
    last_updated_time: Mapped[datetime.datetime] = mapped_column(DateTime, default=utcnow)


class User(Base):
    """An account; an empty `password_hash` means a blank password."""

    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    username: Mapped[str] = mapped_column(String(128), unique=True)
    password_hash: Mapped[str] = mapped_column(String(256), default="")
    admin: Mapped[bool] = mapped_column(Boolean, default=False)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime, default=utcnow)
    # The OS account the user's trials run as (`det user link-with-agent-user`); NULL: the master's default.
    agent_uid: Mapped[Optional[int]] = mapped_column(Integer, nullable=True)
    agent_gid: Mapped[Optional[int]] = mapped_column(Integer, nullable=True)
    agent_user: Mapped[Optional[str]] = mapped_column(String(32), nullable=True)
    agent_group: Mapped[Optional[str]] = mapped_column(String(32), nullable=True)


class AuthToken(Base):
    """A bearer token of a user; only the SHA-256 of the token is stored."""

    __tablename__ = "auth_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id"), index=True)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime, default=utcnow)
    expires_at: Mapped[datetime.datetime] = mapped_column(DateTime)
    revoked: Mapped[bool] = mapped_column(Boolean, default=False)


class Workspace(Base):
    """A named group of projects (and of models); id 1, "Uncategorized", is the immutable default."""

    __tablename__ = "workspaces"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(256), unique=True)
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    immutable: Mapped[bool] = mapped_column(Boolean, default=False)
    owner: Mapped[str] = mapped_column(String(128), default="")
    owner_id: Mapped[Optional[int]] = mapped_column(ForeignKey("users.id"), nullable=True)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime, default=utcnow)


class Project(Base):
    """A named group of experiments inside a workspace (names unique per workspace); id 1 is the default."""

    __tablename__ = "projects"
    __table_args__ = (UniqueConstraint("workspace_id", "name", name="uq_projects_workspace_id_name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id"), index=True)
    name: Mapped[str] = mapped_column(String(256))
    description: Mapped[str] = mapped_column(Text, default="")
    notes: Mapped[Optional[Any]] = mapped_column(JSON, nullable=True)
    archived: Mapped[bool] = mapped_column(Boolean, default=False)
    immutable: Mapped[bool] = mapped_column(Boolean, default=False)
    owner: Mapped[str] = mapped_column(String(128), default="")
    owner_id: Mapped[Optional[int]] = mapped_column(ForeignKey("users.id"), nullable=True)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime, default=utcnow)


class ImportMapping(Base):
    """What `det import determined` did with a row of a source cluster (determined/master/imports/): the row
    `old_id` of `kind` (users, experiments, checkpoints, ...) of the cluster `source` became `new_id` here (an id
    kept where it was free), or was skipped (`new_id` NULL, `note` says why). A re-run skips what is recorded, so
    a killed import continues where it stopped. Metric and log rows are recorded by a watermark instead: kind
    `watermark`, `old_id` the source table (e.g. `metrics:TRAINING`), `new_id` the last source id imported."""

    __tablename__ = "import_mappings"

    source: Mapped[str] = mapped_column(String(128), primary_key=True)
    kind: Mapped[str] = mapped_column(String(32), primary_key=True)
    old_id: Mapped[str] = mapped_column(String(128), primary_key=True)
    new_id: Mapped[Optional[str]] = mapped_column(String(128), nullable=True)
    note: Mapped[Optional[str]] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime.datetime] = mapped_column(DateTime, default=utcnow)


class Task(Base):
    """An interactive task (determined/master/tasks/): a command, a notebook or a TensorBoard, scheduled on the
    same slots as trials. `state` is one of tasks/states.py; `context` the packed `--context` directory;
    `service_secret` the secret the master sends to the task's own server (Jupyter's token), never shown to users;
    `port`/`host` where the task's server listens (the master's proxy, /proxy/<id>/); a shell's SSH key pair.
    Migration 0016 (the keeper's columns: 0018)."""

    __tablename__ = "tasks"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    task_type: Mapped[str] = mapped_column(String(16), index=True)
    state: Mapped[str] = mapped_column(String(32), index=True)  # STATE_TERMINATING is 17 long (0018 widened it)
    description: Mapped[str] = mapped_column(Text, default="")
    owner_id: Mapped[Optional[int]] = mapped_column(ForeignKey("users.id"), nullable=True, index=True)
    owner: Mapped[str] = mapped_column(String(128), default="")
    workspace_id: Mapped[Optional[int]] = mapped_column(ForeignKey("workspaces.id"), nullable=True, index=True)
    config: Mapped[Any] = mapped_column(JSON)
    context: Mapped[Optional[bytes]] = mapped_column(LargeBinary, nullable=True)
    slots: Mapped[int] = mapped_column(Integer, default=1)
    resource_pool: Mapped[str] = mapped_column(String(128), default="default")
    priority: Mapped[Optional[int]] = mapped_column(Integer, nullable=True)
    experiment_ids: Mapped[Optional[Any]] = mapped_column(JSON, nullable=True)
    exit_code: Mapped[Optional[int]] = mapped_column(Integer, nullable=True)
    end_reason: Mapped[Optional[str]] = mapped_column(Text, nullable=True)
    kill_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    port: Mapped[Optional[int]] = mapped_column(Integer, nullable=True)
    host: Mapped[Optional[str]] = mapped_column(String(256), nullable=True)
    service_secret: Mapped[Optional[str]] = mapped_column(String(128), nullable=True)
    # a shell's key pair (OpenSSH format): the private key is given only to its owner and admins
    ssh_private_key: Mapped[Optional[str]] = mapped_column(Text, nullable=True)
    ssh_public_key: Mapped[Optional[str]] = mapped_column(Text, nullable=True)
    slot_ids: Mapped[Optional[Any]] = mapped_column(JSON, nullable=True)
    # the task's keeper process (tasks/keeper.py), which outlives the master: its pid and when it started (clock
    # ticks since boot: a reused pid is not taken for it), the run directory, how far the master has stored each
    # stream's log file ({"stdout": bytes, "stderr": bytes}) and the hash of the owner's token the task acts with:
    # what a restarted master needs to find a running task again (migration 0018)
    pid: Mapped[Optional[int]] = mapped_column(Integer, nullable=True)
    pid_start: Mapped[Optional[int]] = mapped_column(BigInteger, nullable=True)
    run_dir: Mapped[Optional[str]] = mapped_column(Text, nullable=True)
    log_offsets: Mapped[Optional[Any]] = mapped_column(JSON, nullable=True)
    token_hash: Mapped[Optional[str]] = mapped_column(String(64), nullable=True)
    last_activity: Mapped[Optional[datetime.datetime]] = mapped_column(DateTime, nullable=True)
    registered_time: Mapped[datetime.datetime] = mapped_column(DateTime, default=utcnow)
    start_time: Mapped[Optional[datetime.datetime]] = mapped_column(DateTime, nullable=True)
    end_time: Mapped[Optional[datetime.datetime]] = mapped_column(DateTime, nullable=True)


class TaskLog(Base):
    """A line of an interactive task's output, or of the master about it (stream `master`)."""

    __tablename__ = "task_logs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    task_id: Mapped[str] = mapped_column(ForeignKey("tasks.id"), index=True)
    timestamp: Mapped[datetime.datetime] = mapped_column(DateTime)
    stream: Mapped[str] = mapped_column(String(16))
    message: Mapped[str] = mapped_column(Text)


class ResourcePoolBinding(Base):
    """A resource pool bound to a workspace (Determined 0.23.4+): a pool with bindings is usable only from its bound
    workspaces; a pool with none from every workspace. `pool_name` is a name of the master config's pools.
    Migration 0017."""

    __tablename__ = "resource_pool_bindings"

    pool_name: Mapped[str] = mapped_column(String(256), primary_key=True)
    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id"), primary_key=True, index=True)


class WorkspaceDefaultPools(Base):
    """A workspace's own default compute and aux pools (`det workspace edit --default-compute-pool/
    --default-aux-pool`), used when a config names no pool; NULL: the cluster's default. Migration 0017."""

    __tablename__ = "workspace_default_pools"

    workspace_id: Mapped[int] = mapped_column(ForeignKey("workspaces.id"), primary_key=True)
    compute_pool: Mapped[Optional[str]] = mapped_column(String(256), nullable=True)
    aux_pool: Mapped[Optional[str]] = mapped_column(String(256), nullable=True)


class JobQueuePosition(Base):
    """A job's place in its pool's queue set by `det job update --ahead-of/--behind-of` (Determined <= 0.34): it
    orders the job among those of its priority instead of its submission time (seconds since the epoch); a row
    outlives a restart of the master. Migration 0017."""

    __tablename__ = "job_queue_positions"

    job_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    position: Mapped[float] = mapped_column(Float)
