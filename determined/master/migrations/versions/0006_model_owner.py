"""Models get an owner: only the owner or an admin changes a model (description, metadata, versions).

Models created before this migration have no recorded creator; they go to the admin `admin` (else the first
admin), who can change them or hand them over (`PATCH /models/{name}` with `{"owner": USER}`).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""
import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Plain ADD COLUMNs, as in 0003 (a batch copy of `models` would trip the foreign key of model_versions).
    if op.get_bind().dialect.name == "sqlite":
        op.execute("ALTER TABLE models ADD COLUMN owner_id INTEGER REFERENCES users (id)")
    else:
        op.add_column("models", sa.Column("owner_id", sa.Integer(), nullable=True))
        op.create_foreign_key("fk_models_owner_id_users", "models", "users", ["owner_id"], ["id"])
    op.add_column("models", sa.Column("owner", sa.String(128), nullable=False, server_default=""))

    users = sa.table("users", sa.column("id", sa.Integer()), sa.column("username", sa.String()),
                     sa.column("admin", sa.Boolean()))
    models = sa.table("models", sa.column("owner_id", sa.Integer()), sa.column("owner", sa.String()))
    bind = op.get_bind()
    heir = bind.execute(sa.select(users.c.id, users.c.username).where(users.c.admin.is_(sa.true()))
                        .order_by((users.c.username != "admin"), users.c.id).limit(1)).first()
    if heir is not None:
        bind.execute(sa.update(models).values(owner_id=heir.id, owner=heir.username))


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.drop_constraint("fk_models_owner_id_users", "models", type_="foreignkey")
    op.drop_column("models", "owner")
    op.drop_column("models", "owner_id")
