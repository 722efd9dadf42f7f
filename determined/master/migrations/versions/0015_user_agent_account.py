"""The OS account a user's trials run as (`det user link-with-agent-user`): four nullable columns of `users`.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-28
"""
import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

_COLUMNS = (("agent_uid", sa.Integer()), ("agent_gid", sa.Integer()), ("agent_user", sa.String(32)),
            ("agent_group", sa.String(32)))


def upgrade() -> None:
    with op.batch_alter_table("users") as batch:  # SQLite rebuilds the table; PostgreSQL adds the columns
        for name, kind in _COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        for name, _kind in reversed(_COLUMNS):
            batch.drop_column(name)
