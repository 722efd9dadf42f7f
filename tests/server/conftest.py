"""Server tests: real `det master up` processes on 127.0.0.1, on SQLite or (DET_TEST_DB=postgres) PostgreSQL."""
from tests._postgres import (  # noqa: F401  (fixtures and hooks of the PostgreSQL plugin)
    postgres_db_url,
    postgres_server,
    pytest_configure,
    pytest_unconfigure,
)
