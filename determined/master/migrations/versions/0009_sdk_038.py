"""The 0.38 SDK and CLI: experiment notes, model labels and archiving, model version names/comments/notes/metadata,
and config templates.

Revision ID: 0009
Revises: 0007 (on main, after k18a's workspaces: 0008)
Create Date: 2026-12-02
"""
import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain nullable ADD COLUMNs: SQLite adds them without rebuilding the tables others point to.
    op.add_column("experiments", sa.Column("notes", sa.Text(), nullable=True))
    op.add_column("models", sa.Column("labels", sa.JSON(), nullable=True))
    op.add_column("models", sa.Column("archived", sa.Boolean(), nullable=True))
    op.add_column("model_versions", sa.Column("name", sa.String(256), nullable=True))
    op.add_column("model_versions", sa.Column("comment", sa.Text(), nullable=True))
    op.add_column("model_versions", sa.Column("notes", sa.Text(), nullable=True))
    op.add_column("model_versions", sa.Column("metadata", sa.JSON(), nullable=True))
    op.create_table(
        "config_templates",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("name", sa.String(256), nullable=False, unique=True),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("owner", sa.String(128), nullable=False),
        sa.Column("owner_id", sa.Integer(), sa.ForeignKey("users.id"), nullable=True),
        sa.Column("creation_time", sa.DateTime(), nullable=False),
        sa.Column("last_updated_time", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("config_templates")
    with op.batch_alter_table("model_versions") as batch:
        for column in ("metadata", "notes", "comment", "name"):
            batch.drop_column(column)
    with op.batch_alter_table("models") as batch:
        batch.drop_column("archived")
        batch.drop_column("labels")
    with op.batch_alter_table("experiments") as batch:
        batch.drop_column("notes")
