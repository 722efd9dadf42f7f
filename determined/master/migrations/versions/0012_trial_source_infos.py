"""Trial source infos (Determined 0.26): a trial records which checkpoint or model version it used
(`core_context.experimental.report_task_using_*`), and `Checkpoint.get_metrics` / `ModelVersion.get_metrics` read
the metrics of the trials that did. A new table only: nothing existing changes.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27
"""
import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "trial_source_infos",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("trial_id", sa.Integer(), sa.ForeignKey("trials.id"), nullable=False),
        sa.Column("checkpoint_uuid", sa.String(64), sa.ForeignKey("checkpoints.uuid"), nullable=False),
        sa.Column("model_version_id", sa.Integer(), sa.ForeignKey("model_versions.id"), nullable=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("trial_id", "checkpoint_uuid", "model_version_id", "kind",
                            name="uq_trial_source_infos_link"),
    )
    op.create_index("ix_trial_source_infos_trial_id", "trial_source_infos", ["trial_id"])
    op.create_index("ix_trial_source_infos_checkpoint_uuid", "trial_source_infos", ["checkpoint_uuid"])
    op.create_index("ix_trial_source_infos_model_version_id", "trial_source_infos", ["model_version_id"])


def downgrade() -> None:
    op.drop_table("trial_source_infos")
