"""Metrics looked up by trial and step: a report replaces the record at its step without scanning the trial's.

The index on (trial_id, steps_completed) replaces the one on trial_id alone, which it also serves.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

TABLES = ("training_metrics", "validation_metrics")


def upgrade() -> None:
    for table in TABLES:
        op.create_index(f"ix_{table}_trial_id_steps_completed", table, ["trial_id", "steps_completed"])
        op.drop_index(f"ix_{table}_trial_id", table_name=table)


def downgrade() -> None:
    for table in TABLES:
        op.create_index(f"ix_{table}_trial_id", table, ["trial_id"])
        op.drop_index(f"ix_{table}_trial_id_steps_completed", table_name=table)
