"""Determined(master, user) of seed 002 acts as `user`."""
import pytest

from determined.common.api._session import AuthenticationError
from determined.experimental import Determined
from determined.experimental.client._common import UsageError

from tests.auth._helpers import add_user, create_experiment


def test_the_client_acts_as_the_user_it_is_given() -> None:
    admin = Determined(user="admin")
    assert admin.user == "admin" and admin._session.get("/me")["user"]["username"] == "admin"
    add_user(admin._session, "alice")
    add_user(admin._session, "bob", password="bob-pw")

    alice = Determined(user="alice")
    experiment = create_experiment(alice._session)
    assert experiment["owner"] == "alice"
    assert alice.get_experiment(experiment["id"]).id == experiment["id"]
    assert Determined().user == "determined"  # no user given, no DET_USER, no login: the default user

    with pytest.raises(AuthenticationError, match="det user login bob"):
        Determined(user="bob").get_models()  # bob has a password and no token: a clear error, not another user
    with pytest.raises(UsageError, match="user must be a user name"):
        Determined(user="")
