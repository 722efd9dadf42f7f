"""The web UI: server-side page shells (jinja2) whose scripts read the REST API and draw with plotly.js."""
from determined.master.ui.pages import router

__all__ = ["router"]
