"""An index on trials (experiment_id, state): the trials of an experiment that are still open (not ended) are
found without reading its ended ones. The scheduler asks at every trial's end (the search method's progress
reads the open trials' training; the experiment's end check looks for one), and a search may hold 10,000
ended trials.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27
"""
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_trials_experiment_id_state", "trials", ["experiment_id", "state"])


def downgrade() -> None:
    op.drop_index("ix_trials_experiment_id_state", table_name="trials")
