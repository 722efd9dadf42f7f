"""Slowing down password guessing: back-off per user and per client address, and password hashes (scrypt) on a
small pool of their own threads, so that a storm of logins never slows the other routes (docs/auth.md).

After USER_FREE_FAILURES failed logins in a row of a user name (whether it exists or not), or ADDRESS_FREE_FAILURES
from one client address, the next try must wait: 1 s, then 2, 4, 8 ... up to USER_MAX_WAIT (a user) or
ADDRESS_MAX_WAIT (an address).
A try during the wait is answered 429 with Retry-After, without checking the password. Every try counts as a failure
until it succeeds (tries sent in parallel are held back too); a successful login clears the user's count and takes
only its own try back from the address's count (a correct login of one's own account must not wipe the failures
an address made guessing other accounts' passwords), and a count lapses after FORGET_AFTER seconds without
failures.
"""
import asyncio
import concurrent.futures
import ipaddress
import math
import os
import threading
import time
from typing import Callable, Dict, Optional, Tuple, TypeVar

USER_FREE_FAILURES = 5
ADDRESS_FREE_FAILURES = 20  # several people may share an address (a NAT, a proxy)
FIRST_WAIT = 1.0
USER_MAX_WAIT = 60.0
ADDRESS_MAX_WAIT = 300.0
FORGET_AFTER = 3600.0
MAX_TRACKED = 10_000  # keys per table; the oldest are forgotten beyond it
MAX_WAITING_HASHES = 64  # logins waiting for the hash pool; more are answered 429 at once

T = TypeVar("T")


class TooManyLogins(Exception):
    """A login refused before its password was checked; `retry_after` is in seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = max(1, math.ceil(retry_after))


class _Failures:
    """Failed logins per key: (failures in a row, time of the last failure)."""

    def __init__(self, free: int, max_wait: float) -> None:
        self.free = free
        self.max_wait = max_wait
        self.entries: Dict[str, Tuple[int, float]] = {}

    def wait(self, key: str, now: float) -> float:
        """Seconds `key` must still wait before its next try (0: may try now)."""
        entry = self.entries.get(key)
        if entry is None:
            return 0.0
        count, last = entry
        if now - last > FORGET_AFTER:
            del self.entries[key]
            return 0.0
        if count < self.free:
            return 0.0
        delay = min(self.max_wait, FIRST_WAIT * 2 ** min(count - self.free, 30))
        return max(0.0, last + delay - now)

    def failed(self, key: str, now: float) -> None:
        count, last = self.entries.pop(key, (0, now))
        self.entries[key] = (0 if now - last > FORGET_AFTER else count) + 1, now  # re-inserted: the newest last
        while len(self.entries) > MAX_TRACKED:
            del self.entries[next(iter(self.entries))]

    def touch(self, key: str, now: float) -> None:
        """The try that began counting as a failure has failed now: the wait runs from here."""
        entry = self.entries.get(key)
        if entry is not None:
            self.entries[key] = (entry[0], now)

    def clear(self, key: str) -> None:
        self.entries.pop(key, None)

    def take_back(self, key: str) -> None:
        """One try counted by `begin` succeeded: it is no failure; the others stay counted."""
        entry = self.entries.get(key)
        if entry is None:
            return
        if entry[0] <= 1:
            del self.entries[key]
        else:
            self.entries[key] = (entry[0] - 1, entry[1])


class LoginThrottle:
    """The back-off of failed logins (see the module docstring); thread-safe."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.users = _Failures(USER_FREE_FAILURES, USER_MAX_WAIT)
        self.addresses = _Failures(ADDRESS_FREE_FAILURES, ADDRESS_MAX_WAIT)
        self._lock = threading.Lock()

    def begin(self, username: str, address: str) -> None:
        """Start a login try: TooManyLogins when `username` or `address` must wait; else the try counts as failed
        until `succeeded` (so tries sent in parallel are held back as well)."""
        user, where = _user_key(username), _address_key(address)
        with self._lock:
            now = self.clock()
            user_wait = self.users.wait(user, now)
            address_wait = self.addresses.wait(where, now)
            if user_wait <= 0 and address_wait <= 0:
                self.users.failed(user, now)
                self.addresses.failed(where, now)
                return
        whom = f"user {username[:128]!r}" if user_wait >= address_wait else f"your address ({address})"
        wait = max(user_wait, address_wait)
        raise TooManyLogins(f"too many failed logins for {whom}: try again in {math.ceil(wait)} s", wait)

    def failed(self, username: str, address: str) -> None:
        """The try of `begin` failed (a wrong password): the waits count from now."""
        with self._lock:
            now = self.clock()
            self.users.touch(_user_key(username), now)
            self.addresses.touch(_address_key(address), now)

    def succeeded(self, username: str, address: str) -> None:
        """The try of `begin` succeeded: the user's failures are forgotten, the address's other failures are not."""
        with self._lock:
            self.users.clear(_user_key(username))
            self.addresses.take_back(_address_key(address))


def _user_key(username: str) -> str:
    return username[:129].lower()  # usernames have at most 128 characters


def _address_key(address: str) -> str:
    """An IPv6 address counts by its /64 network (one host usually holds all of it)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address[:64]
    if ip.version == 6 and not ip.is_loopback:
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class HashPool:
    """Password hashing on its own few threads: scrypt takes tens of milliseconds of CPU, and a storm of logins
    then queues here instead of taking the CPU from every other route."""

    def __init__(self, workers: Optional[int] = None, max_waiting: int = MAX_WAITING_HASHES) -> None:
        self.workers = workers or max(1, (os.cpu_count() or 2) // 4)
        self.max_waiting = max_waiting
        self._executor: Optional[concurrent.futures.ThreadPoolExecutor] = None
        self._waiting = 0
        self._lock = threading.Lock()

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """`fn(*args)` on the pool, awaited; TooManyLogins when too many are already waiting."""
        with self._lock:
            if self._waiting >= self.max_waiting:
                raise TooManyLogins("too many logins at once: try again in a moment", 1)
            self._waiting += 1
            if self._executor is None:
                self._executor = concurrent.futures.ThreadPoolExecutor(self.workers, thread_name_prefix="det-password")
            executor = self._executor
        try:
            return await asyncio.wrap_future(executor.submit(fn, *args))
        finally:
            with self._lock:
                self._waiting -= 1

    def shutdown(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
