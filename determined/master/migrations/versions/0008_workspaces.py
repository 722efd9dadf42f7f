"""Workspaces and projects (Determined 0.18.3+): every experiment belongs to a project, every model to a workspace.

Creates the default workspace "Uncategorized" (id 1) with its project "Uncategorized" (id 1); both are immutable
(never renamed, archived or deleted). Existing experiments move into that project, existing models into that
workspace.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23
"""
import datetime

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    workspaces = op.create_table(
        "workspaces",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(256), nullable=False, unique=True),
        sa.Column("archived", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("immutable", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("owner", sa.String(128), nullable=False, server_default=""),
        sa.Column("owner_id", sa.Integer(), sa.ForeignKey("users.id"), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )
    projects = op.create_table(
        "projects",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("workspace_id", sa.Integer(), sa.ForeignKey("workspaces.id"), nullable=False, index=True),
        sa.Column("name", sa.String(256), nullable=False),
        sa.Column("description", sa.Text(), nullable=False, server_default=""),
        sa.Column("notes", sa.JSON(), nullable=True),
        sa.Column("archived", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("immutable", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("owner", sa.String(128), nullable=False, server_default=""),
        sa.Column("owner_id", sa.Integer(), sa.ForeignKey("users.id"), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("workspace_id", "name", name="uq_projects_workspace_id_name"),
    )
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    op.bulk_insert(workspaces, [{"id": 1, "name": "Uncategorized", "archived": False, "immutable": True,
                                 "owner": "", "owner_id": None, "created_at": now}])
    op.bulk_insert(projects, [{"id": 1, "workspace_id": 1, "name": "Uncategorized", "description": "",
                               "notes": [], "archived": False, "immutable": True, "owner": "", "owner_id": None,
                               "created_at": now}])
    if op.get_bind().dialect.name == "postgresql":  # explicit ids do not advance the sequences
        op.execute("SELECT setval('workspaces_id_seq', (SELECT MAX(id) FROM workspaces))")
        op.execute("SELECT setval('projects_id_seq', (SELECT MAX(id) FROM projects))")

    # Plain ADD COLUMNs, as in 0003 and 0006 (a batch copy of `experiments`/`models` would trip the foreign keys
    # that point at them); NULL never stays: the rows are filled here and every new row gets its project/workspace.
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE experiments ADD COLUMN project_id INTEGER REFERENCES projects (id)")
        op.execute("ALTER TABLE models ADD COLUMN workspace_id INTEGER REFERENCES workspaces (id)")
    else:
        op.add_column("experiments", sa.Column("project_id", sa.Integer(), nullable=True))
        op.create_foreign_key("fk_experiments_project_id_projects", "experiments", "projects", ["project_id"], ["id"])
        op.add_column("models", sa.Column("workspace_id", sa.Integer(), nullable=True))
        op.create_foreign_key("fk_models_workspace_id_workspaces", "models", "workspaces", ["workspace_id"], ["id"])
    op.create_index("ix_experiments_project_id", "experiments", ["project_id"])
    op.create_index("ix_models_workspace_id", "models", ["workspace_id"])
    op.execute("UPDATE experiments SET project_id = 1")
    op.execute("UPDATE models SET workspace_id = 1")


def downgrade() -> None:
    op.drop_index("ix_models_workspace_id", "models")
    op.drop_index("ix_experiments_project_id", "experiments")
    if op.get_bind().dialect.name != "sqlite":
        op.drop_constraint("fk_models_workspace_id_workspaces", "models", type_="foreignkey")
        op.drop_constraint("fk_experiments_project_id_projects", "experiments", type_="foreignkey")
    op.drop_column("models", "workspace_id")
    op.drop_column("experiments", "project_id")
    op.drop_table("projects")
    op.drop_table("workspaces")
