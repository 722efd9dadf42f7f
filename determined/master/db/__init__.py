"""The master's database: models, engine and migrations."""
from determined.master.db.engine import default_db_url, make_engine, upgrade
from determined.master.db.models import (
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
    ValidationMetrics,
    utcnow,
)

__all__ = [
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
    "ValidationMetrics",
    "default_db_url",
    "make_engine",
    "upgrade",
    "utcnow",
]
