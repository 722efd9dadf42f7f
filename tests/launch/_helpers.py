"""Helpers of the script entrypoint and launcher tests."""
import time
from typing import Any, Callable


def wait_for(what: Callable[[], Any], timeout: float, message: str, interval: float = 0.05) -> Any:
    """`what()`'s first truthy value, polled every `interval` s; AssertionError naming `message` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {message}")
