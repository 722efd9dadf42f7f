"""The scheduling tests: the auth tests' in-process master and cheap password hashes; SQLite or PostgreSQL."""
from tests._postgres import (  # noqa: F401  (fixtures and hooks of the PostgreSQL plugin)
    postgres_db_url,
    postgres_server,
    pytest_configure,
    pytest_unconfigure,
)
from tests.auth.conftest import cheap_password_hashes, master  # noqa: F401  (fixtures)
