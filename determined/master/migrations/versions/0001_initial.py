"""The initial schema: experiments, trials, searcher operations and events, metrics, checkpoints, trial logs.

Revision ID: 0001
Revises:
Create Date: 2024-01-01
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "experiments",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("model_def", sa.LargeBinary(), nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("searcher_snapshot", sa.JSON(), nullable=True),
        sa.Column("searcher_shutdown", sa.Boolean(), nullable=False),
        sa.Column("searcher_failure", sa.Boolean(), nullable=False),
        sa.Column("progress", sa.Float(), nullable=False),
        sa.Column("best_validation", sa.Float(), nullable=True),
        sa.Column("best_trial_id", sa.Integer(), nullable=True),
        sa.Column("start_time", sa.DateTime(), nullable=False),
        sa.Column("end_time", sa.DateTime(), nullable=True),
    )
    op.create_index("ix_experiments_state", "experiments", ["state"])

    op.create_table(
        "trials",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("experiment_id", sa.Integer(), sa.ForeignKey("experiments.id"), nullable=False),
        sa.Column("request_id", sa.String(64), nullable=False),
        sa.Column("hparams", sa.JSON(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("restarts", sa.Integer(), nullable=False),
        sa.Column("total_batches", sa.Integer(), nullable=False),
        sa.Column("runs", sa.Integer(), nullable=False),
        sa.Column("allocation_id", sa.String(64), nullable=True),
        sa.Column("session_token", sa.String(128), nullable=True),
        sa.Column("preempt_requested", sa.Boolean(), nullable=False),
        sa.Column("close_requested", sa.Boolean(), nullable=False),
        sa.Column("early_exit_reason", sa.String(32), nullable=True),
        sa.Column("warm_start_checkpoint_uuid", sa.String(64), nullable=True),
        sa.Column("latest_checkpoint_uuid", sa.String(64), nullable=True),
        sa.Column("best_validation", sa.Float(), nullable=True),
        sa.Column("latest_validation", sa.JSON(), nullable=True),
        sa.Column("start_time", sa.DateTime(), nullable=False),
        sa.Column("end_time", sa.DateTime(), nullable=True),
    )
    op.create_index("ix_trials_experiment_id", "trials", ["experiment_id"])
    op.create_index("ix_trials_state", "trials", ["state"])
    op.create_index("ix_trials_allocation_id", "trials", ["allocation_id"])

    op.create_table(
        "searcher_operations",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("trial_id", sa.Integer(), sa.ForeignKey("trials.id"), nullable=False),
        sa.Column("length", sa.Integer(), nullable=False),
        sa.Column("length_batches", sa.Integer(), nullable=False),
        sa.Column("completed", sa.Boolean(), nullable=False),
    )
    op.create_index("ix_searcher_operations_trial_id", "searcher_operations", ["trial_id"])

    op.create_table(
        "searcher_events",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("experiment_id", sa.Integer(), sa.ForeignKey("experiments.id"), nullable=False),
        sa.Column("event", sa.JSON(), nullable=False),
        sa.Column("operations", sa.JSON(), nullable=False),
        sa.Column("time", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_searcher_events_experiment_id", "searcher_events", ["experiment_id"])

    op.create_table(
        "training_metrics",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("trial_id", sa.Integer(), sa.ForeignKey("trials.id"), nullable=False),
        sa.Column("steps_completed", sa.Integer(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("batch_metrics", sa.JSON(), nullable=False),
        sa.Column("end_time", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_training_metrics_trial_id", "training_metrics", ["trial_id"])

    op.create_table(
        "validation_metrics",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("trial_id", sa.Integer(), sa.ForeignKey("trials.id"), nullable=False),
        sa.Column("steps_completed", sa.Integer(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("end_time", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_validation_metrics_trial_id", "validation_metrics", ["trial_id"])

    op.create_table(
        "checkpoints",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("uuid", sa.String(64), nullable=False, unique=True),
        sa.Column("experiment_id", sa.Integer(), sa.ForeignKey("experiments.id"), nullable=False),
        sa.Column("trial_id", sa.Integer(), sa.ForeignKey("trials.id"), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("steps_completed", sa.Integer(), nullable=False),
        sa.Column("resources", sa.JSON(), nullable=False),
        sa.Column("framework", sa.String(128), nullable=False),
        sa.Column("format", sa.String(128), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("determined_version", sa.String(64), nullable=False),
        sa.Column("start_time", sa.DateTime(), nullable=False),
        sa.Column("end_time", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_checkpoints_experiment_id", "checkpoints", ["experiment_id"])
    op.create_index("ix_checkpoints_trial_id", "checkpoints", ["trial_id"])

    op.create_table(
        "trial_logs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("trial_id", sa.Integer(), sa.ForeignKey("trials.id"), nullable=False),
        sa.Column("timestamp", sa.DateTime(), nullable=False),
        sa.Column("stream", sa.String(16), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
    )
    op.create_index("ix_trial_logs_trial_id", "trial_logs", ["trial_id"])


def downgrade() -> None:
    for table in ("trial_logs", "checkpoints", "validation_metrics", "training_metrics", "searcher_events",
                  "searcher_operations", "trials", "experiments"):
        op.drop_table(table)
