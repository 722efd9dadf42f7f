"""The web UI: server-side page shells (jinja2) whose scripts read the REST API and draw with plotly.js."""
from determined.master.ui.pages import not_found_handler, router

__all__ = ["not_found_handler", "router"]
