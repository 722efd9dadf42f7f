"""Users, auth tokens, the owner of each experiment and the archived mark.

Seeds the default users `admin` (an admin) and `determined`, both with blank passwords (an empty
password_hash means a blank password). Existing experiments get the user named by their `owner` column.

Revision ID: 0003
Revises: 0002
Create Date: 2024-03-01
"""
import datetime

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    users = op.create_table(
        "users",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("username", sa.String(128), nullable=False, unique=True),
        sa.Column("password_hash", sa.String(256), nullable=False),
        sa.Column("admin", sa.Boolean(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    op.create_table(
        "auth_tokens",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("user_id", sa.Integer(), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("revoked", sa.Boolean(), nullable=False),
    )
    op.create_index("ix_auth_tokens_user_id", "auth_tokens", ["user_id"])
    op.create_index("ix_trials_session_token", "trials", ["session_token"])

    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    op.bulk_insert(users, [
        {"username": "admin", "password_hash": "", "admin": True, "active": True, "created_at": now},
        {"username": "determined", "password_hash": "", "admin": False, "active": True, "created_at": now},
    ])

    # Plain ADD COLUMNs: on SQLite a batch copy of `experiments` would trip the foreign keys that point at it,
    # so its foreign key is declared inline there.
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE experiments ADD COLUMN owner_id INTEGER REFERENCES users (id)")
    else:
        op.add_column("experiments", sa.Column("owner_id", sa.Integer(), nullable=True))
        op.create_foreign_key("fk_experiments_owner_id_users", "experiments", "users", ["owner_id"], ["id"])
    op.add_column("experiments", sa.Column("archived", sa.Boolean(), nullable=False, server_default=sa.false()))
    op.execute("UPDATE experiments SET owner_id = (SELECT users.id FROM users WHERE users.username = experiments.owner)")


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.drop_constraint("fk_experiments_owner_id_users", "experiments", type_="foreignkey")
    op.drop_column("experiments", "archived")
    op.drop_column("experiments", "owner_id")
    op.drop_index("ix_trials_session_token", "trials")
    op.drop_table("auth_tokens")
    op.drop_table("users")
