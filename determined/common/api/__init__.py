"""The HTTP session that the CLI, the SDK and trial processes use to talk to a master."""
from determined.common.api._asgi import ASGIThreadTransport, InProcessClient
from determined.common.api._session import AuthenticationError, Session, http_client, make_url

__all__ = ["ASGIThreadTransport", "AuthenticationError", "InProcessClient", "Session", "http_client", "make_url"]
