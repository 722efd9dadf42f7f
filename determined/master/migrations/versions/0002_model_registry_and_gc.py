"""The model registry (models, model_versions) and the checkpoint GC mark of experiments.

Revision ID: 0002
Revises: 0001
Create Date: 2024-02-01
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("experiments") as batch:
        batch.add_column(sa.Column("checkpoint_gc_done", sa.Boolean(), nullable=True))

    op.create_table(
        "models",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(256), nullable=False, unique=True),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("metadata", sa.JSON(), nullable=False),
        sa.Column("creation_time", sa.DateTime(), nullable=False),
        sa.Column("last_updated_time", sa.DateTime(), nullable=False),
    )

    op.create_table(
        "model_versions",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("model_id", sa.Integer(), sa.ForeignKey("models.id"), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("checkpoint_uuid", sa.String(64), sa.ForeignKey("checkpoints.uuid"), nullable=False),
        sa.Column("creation_time", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("model_id", "version", name="uq_model_versions_model_id_version"),
    )
    op.create_index("ix_model_versions_model_id", "model_versions", ["model_id"])
    op.create_index("ix_model_versions_checkpoint_uuid", "model_versions", ["checkpoint_uuid"])


def downgrade() -> None:
    op.drop_table("model_versions")
    op.drop_table("models")
    with op.batch_alter_table("experiments") as batch:
        batch.drop_column("checkpoint_gc_done")
