"""Imports of another cluster's history into this master (`det import determined`).

`determined.py` writes the rows a client read from a Determined 0.2x-0.38 master's database: users, workspaces,
projects, experiments, trials, metrics, checkpoints, the model registry and trial logs. The master never connects to
a database a client names: the client reads the source and sends typed batches (determined/master/api/imports.py);
each batch is one transaction here, and the import mapping table (db.ImportMapping) records what every row became,
so a re-run imports nothing twice and a killed run continues. The rules are in docs/import.md.
"""
