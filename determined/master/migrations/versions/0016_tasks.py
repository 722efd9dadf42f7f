"""Interactive tasks (`det cmd`, `det notebook`, `det tensorboard`, determined/master/tasks/): the `tasks` table and
their logs, `task_logs`. New tables only.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28
"""
import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tasks",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("task_type", sa.String(16), nullable=False, index=True),
        sa.Column("state", sa.String(16), nullable=False, index=True),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("owner_id", sa.Integer(), sa.ForeignKey("users.id"), nullable=True, index=True),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("workspace_id", sa.Integer(), sa.ForeignKey("workspaces.id"), nullable=True, index=True),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("context", sa.LargeBinary(), nullable=True),
        sa.Column("slots", sa.Integer(), nullable=False),
        sa.Column("resource_pool", sa.String(128), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=True),
        sa.Column("experiment_ids", sa.JSON(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("end_reason", sa.Text(), nullable=True),
        sa.Column("kill_requested", sa.Boolean(), nullable=False),
        sa.Column("port", sa.Integer(), nullable=True),
        sa.Column("host", sa.String(256), nullable=True),
        sa.Column("service_secret", sa.String(128), nullable=True),
        sa.Column("ssh_private_key", sa.Text(), nullable=True),
        sa.Column("ssh_public_key", sa.Text(), nullable=True),
        sa.Column("slot_ids", sa.JSON(), nullable=True),
        sa.Column("pid", sa.Integer(), nullable=True),
        sa.Column("last_activity", sa.DateTime(), nullable=True),
        sa.Column("registered_time", sa.DateTime(), nullable=False),
        sa.Column("start_time", sa.DateTime(), nullable=True),
        sa.Column("end_time", sa.DateTime(), nullable=True),
    )
    op.create_table(
        "task_logs",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("task_id", sa.String(64), sa.ForeignKey("tasks.id"), nullable=False, index=True),
        sa.Column("timestamp", sa.DateTime(), nullable=False),
        sa.Column("stream", sa.String(16), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("task_logs")
    op.drop_table("tasks")
