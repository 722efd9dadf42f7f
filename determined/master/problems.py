"""The error the master's logic raises for a bad request; the API turns it into an HTTP error."""
from typing import List, Optional


class RequestProblem(Exception):
    """A request the master refuses: `status` is the HTTP status, `problems` the individual reasons."""

    def __init__(self, status: int, message: str, problems: Optional[List[str]] = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.problems = list(problems or [])


def not_found(kind: str, ident: object) -> RequestProblem:
    return RequestProblem(404, f"{kind} {ident} not found")
