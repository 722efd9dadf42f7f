"""`det import determined`: a Determined 0.20-0.38 master's history (its PostgreSQL database, or a pg_dump of it)
imported into this platform's master. The client reads the source (`_source.py`), the master writes through its
admin-only import routes (determined/master/api/imports.py); see docs/import.md."""
from determined.experimental.determined_import._runner import KINDS, Summary, run_import
from determined.experimental.determined_import._source import Source, SourceError

__all__ = ["KINDS", "Source", "SourceError", "Summary", "run_import"]
