"""The master's database: models, engine and migrations."""
from determined.master.db.engine import default_db_url, make_engine, upgrade
from determined.master.db.models import (
    AuthToken,
    Base,
    Checkpoint,
    Experiment,
    Model,
    ModelVersion,
    SearcherEvent,
    SearcherOperation,
    TrainingMetrics,
    Trial,
    TrialLog,
    User,
    ValidationMetrics,
    utcnow,
)

__all__ = [
    "AuthToken",
    "Base",
    "Checkpoint",
    "Experiment",
    "Model",
    "ModelVersion",
    "SearcherEvent",
    "SearcherOperation",
    "TrainingMetrics",
    "Trial",
    "TrialLog",
    "User",
    "ValidationMetrics",
    "default_db_url",
    "make_engine",
    "upgrade",
    "utcnow",
]
