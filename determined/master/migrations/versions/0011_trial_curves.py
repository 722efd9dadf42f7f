"""Learning curves that survive a master restart: each trial's downsampled series is kept in `trial_curves`
under the trial's `metrics_version`, which every change to its training or validation metrics increases in the
same transaction (determined/master/insights/curves.py). An index finds a trial by its request id (what the search
method names) without reading the experiment's other trials.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-26
"""
import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A plain nullable ADD COLUMN: SQLite adds it without rebuilding the tables that point to `trials`.
    op.add_column("trials", sa.Column("metrics_version", sa.Integer(), nullable=True))
    op.create_index("ix_trials_experiment_id_request_id", "trials", ["experiment_id", "request_id"])
    op.create_table(
        "trial_curves",
        sa.Column("trial_id", sa.Integer(), sa.ForeignKey("trials.id"), primary_key=True),
        sa.Column("group_name", sa.String(32), primary_key=True),
        sa.Column("max_points", sa.Integer(), primary_key=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("points", sa.Text(), nullable=False),
        sa.Column("names", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("trial_curves")
    op.drop_index("ix_trials_experiment_id_request_id", table_name="trials")
    with op.batch_alter_table("trials") as batch:
        batch.drop_column("metrics_version")
