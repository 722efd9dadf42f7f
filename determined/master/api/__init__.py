"""The master's REST API under /api/v1: one module of routes per area, their typed models in `schemas/`, and the
one table that registers them all (`routes.py`); `contract.py` holds the error shape and the contract checks."""
