"""The keeper of an interactive task (determined/master/tasks/keeper.py), which outlives the master: what a restarted
master needs to find a running task again: new nullable columns of `tasks`. And `tasks.state` widened from 16 to 32
characters: `STATE_TERMINATING` (17) did not fit, which PostgreSQL refused (SQLite does not check lengths).

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-28
"""
import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.alter_column("state", existing_type=sa.String(16), type_=sa.String(32), existing_nullable=False)
        batch.add_column(sa.Column("pid_start", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("run_dir", sa.Text(), nullable=True))
        batch.add_column(sa.Column("log_offsets", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("token_hash", sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("tasks") as batch:
        batch.drop_column("token_hash")
        batch.drop_column("log_offsets")
        batch.drop_column("run_dir")
        batch.drop_column("pid_start")
        batch.alter_column("state", existing_type=sa.String(32), type_=sa.String(16), existing_nullable=False)
