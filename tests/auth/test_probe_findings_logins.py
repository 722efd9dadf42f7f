"""Issue 33, finding 8: a correct login of one's own account reset the address's failure count.

A user guessing other accounts' passwords from one address could log in to their own account every 19 tries and
never be slowed down. A success now clears that user's count and takes back only its own try from the address's.
"""
import pytest

from determined.master.security import login_throttle
from determined.master.security.login_throttle import LoginThrottle, TooManyLogins

from ._helpers import InProcessMaster, add_user


class FrozenClock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


def _fail(throttle: LoginThrottle, user: str, address: str) -> None:
    throttle.begin(user, address)
    throttle.failed(user, address)


def test_own_login_keeps_the_addresss_failures() -> None:
    throttle = LoginThrottle(FrozenClock())
    for i in range(login_throttle.ADDRESS_FREE_FAILURES - 1):
        _fail(throttle, f"victim-{i}", "198.51.100.7")
    throttle.begin("bob", "198.51.100.7")
    throttle.succeeded("bob", "198.51.100.7")  # bob's own account, right password
    _fail(throttle, "victim-x", "198.51.100.7")  # the 20th failure of the address
    with pytest.raises(TooManyLogins, match="your address"):
        throttle.begin("victim-y", "198.51.100.7")


def test_own_login_still_clears_the_users_count() -> None:
    throttle = LoginThrottle(FrozenClock())
    for _ in range(login_throttle.USER_FREE_FAILURES - 1):
        _fail(throttle, "bob", "198.51.100.8")
    throttle.begin("bob", "198.51.100.8")
    throttle.succeeded("bob", "198.51.100.8")
    for _ in range(login_throttle.USER_FREE_FAILURES):  # a fresh allowance: none of these waits
        _fail(throttle, "bob", "198.51.100.8")
    with pytest.raises(TooManyLogins, match="user 'bob'"):
        throttle.begin("bob", "198.51.100.8")


def test_over_http_a_guesser_is_held_back_despite_own_logins(master: InProcessMaster) -> None:
    admin = master.session("admin")
    add_user(admin, "bob", "bob-pw")
    master.app.state.login_throttle.clock = FrozenClock()  # no wait lapses while the test runs
    client = master.client()
    for i in range(login_throttle.ADDRESS_FREE_FAILURES - 1):
        answer = client.post("/api/v1/auth/login", json={"username": f"guess-{i}", "password": "x"})
        assert answer.status_code == 401, answer.text
    assert client.post("/api/v1/auth/login", json={"username": "bob", "password": "bob-pw"}).status_code == 200
    assert client.post("/api/v1/auth/login", json={"username": "admin", "password": "x"}).status_code == 401
    held = client.post("/api/v1/auth/login", json={"username": "admin", "password": "x"})
    assert held.status_code == 429 and "your address" in held.text and held.headers["Retry-After"] == "1"
