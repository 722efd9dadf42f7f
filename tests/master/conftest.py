"""The master tests run on SQLite, or on PostgreSQL with DET_TEST_DB=postgres (see tests/_postgres.py)."""
from tests._postgres import (  # noqa: F401  (fixtures and hooks of the PostgreSQL plugin)
    postgres_db_url,
    postgres_server,
    pytest_configure,
    pytest_unconfigure,
)
