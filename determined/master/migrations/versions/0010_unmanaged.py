"""Unmanaged experiments (Determined 0.38's `determined.experimental.core_v2`): a script run outside the platform
records its experiment and trials here; the external ids let a later run reuse them.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-26
"""
import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain nullable ADD COLUMNs: SQLite adds them without rebuilding the tables others point to.
    op.add_column("experiments", sa.Column("unmanaged", sa.Boolean(), nullable=True))
    op.add_column("experiments", sa.Column("external_experiment_id", sa.String(256), nullable=True))
    op.add_column("trials", sa.Column("external_trial_id", sa.String(256), nullable=True))
    op.create_index("ix_experiments_external_experiment_id", "experiments", ["external_experiment_id"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_experiments_external_experiment_id", table_name="experiments")
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("external_trial_id")
    with op.batch_alter_table("experiments") as batch:
        batch.drop_column("external_experiment_id")
        batch.drop_column("unmanaged")
