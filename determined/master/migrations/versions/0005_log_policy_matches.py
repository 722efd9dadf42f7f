"""Trials remember which log policies their logs matched (``log_policies``, Determined 0.26.4+).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.add_column(sa.Column("log_policy_matches", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("log_policy_matches")
