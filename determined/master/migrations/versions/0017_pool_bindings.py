"""Workspace <-> resource pool bindings (Determined 0.23.4+), each workspace's default compute and aux pools, and the
queue positions `det job update --ahead-of/--behind-of` sets (kept across restarts of the master). New tables only.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28
"""
import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "resource_pool_bindings",
        sa.Column("pool_name", sa.String(256), primary_key=True),
        sa.Column("workspace_id", sa.Integer(), sa.ForeignKey("workspaces.id"), primary_key=True, index=True),
    )
    op.create_table(
        "workspace_default_pools",
        sa.Column("workspace_id", sa.Integer(), sa.ForeignKey("workspaces.id"), primary_key=True),
        sa.Column("compute_pool", sa.String(256), nullable=True),
        sa.Column("aux_pool", sa.String(256), nullable=True),
    )
    op.create_table(
        "job_queue_positions",
        sa.Column("job_id", sa.String(64), primary_key=True),
        sa.Column("position", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("job_queue_positions")
    op.drop_table("workspace_default_pools")
    op.drop_table("resource_pool_bindings")
