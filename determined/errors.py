"""Exceptions shared by every layer of the platform."""


class DeterminedError(Exception):
    """Base class of the platform's own errors: the message says what went wrong and how to fix it."""


class MasterNotFoundError(DeterminedError):
    """No master answers at the given URL."""


class APIError(DeterminedError):
    """The master answered a request with an error status."""

    def __init__(self, status_code: int, message: str, problems: "list[str] | None" = None) -> None:
        self.status_code = status_code
        self.message = message
        self.problems = list(problems or [])
        text = message if not self.problems else message + "\n" + "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(text)


class NotFoundError(APIError):
    """The requested object does not exist."""


class InvalidTrialError(DeterminedError):
    """A Trial class or model dir does not meet the Trial API (missing method, both evaluate methods, ...)."""


class InvalidHP(Exception):
    """Raise it (as ``det.InvalidHP("why")``) from a trial's ``__init__``, ``train_batch`` or ``evaluate_batch`` when
    its hyperparameters cannot work: the trial stops without error or restart, and the search method hears that
    the hyperparameters were invalid (0.13+ HP search constraints)."""
