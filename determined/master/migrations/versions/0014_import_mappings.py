"""The import mapping table (`det import determined`, determined/master/imports/): which row of a source Determined
cluster became which row here, or why it was skipped; a re-run skips what it records. A new table only.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-01
"""
import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "import_mappings",
        sa.Column("source", sa.String(128), primary_key=True),
        sa.Column("kind", sa.String(32), primary_key=True),
        sa.Column("old_id", sa.String(128), primary_key=True),
        sa.Column("new_id", sa.String(128), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("import_mappings")
