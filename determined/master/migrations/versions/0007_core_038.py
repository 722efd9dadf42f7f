"""Core API of Determined 0.38: metrics of any group, the preemption acknowledgement, a run's status and metadata.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""
import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "group_metrics",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("trial_id", sa.Integer(), sa.ForeignKey("trials.id"), nullable=False),
        sa.Column("group_name", sa.String(128), nullable=False),
        sa.Column("steps_completed", sa.Integer(), nullable=False),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("end_time", sa.DateTime(), nullable=False),
    )
    op.create_index("ix_group_metrics_trial_id_group_steps", "group_metrics",
                    ["trial_id", "group_name", "steps_completed"])
    # Plain ADD COLUMNs (nullable): SQLite adds them without rebuilding the table the others point to.
    op.add_column("trials", sa.Column("preempt_acked", sa.Boolean(), nullable=True))
    op.add_column("trials", sa.Column("runner_status", sa.Text(), nullable=True))
    op.add_column("trials", sa.Column("run_metadata", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("run_metadata")
        batch.drop_column("runner_status")
        batch.drop_column("preempt_acked")
    op.drop_index("ix_group_metrics_trial_id_group_steps", "group_metrics")
    op.drop_table("group_metrics")
