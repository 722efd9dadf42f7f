"""`det user link-with-agent-user` (issue 33): an admin links a user with the OS account their trials run as
(`PATCH /users/{name}` with `agent_user_group`, stored in the 0015 migration's columns), shown by `det user
describe/list` and the SDK; nobody else may, root's ids and malformed fields are refused by name, null unlinks."""
import pathlib

import pytest

from determined.common.api import Session
from determined.errors import APIError
from determined.experimental import Determined

from tests.auth._helpers import InProcessMaster, add_user
from tests.client._cli import cli_fails, det, det_json

LINK = {"agent_uid": 1234, "agent_gid": 1235, "agent_user": "alice-os", "agent_group": "alice-grp"}


def _refusal(session: Session, username: str, body: object) -> str:
    with pytest.raises(APIError) as caught:
        session.patch(f"/users/{username}", body)
    return f"{caught.value.status_code} {caught.value}"


def test_admins_link_users_with_accounts_and_nobody_else_does(tmp_path: pathlib.Path) -> None:
    master = InProcessMaster(tmp_path / "data")
    admin = master.session("admin")
    for name in ("alice", "bob"):
        add_user(admin, name)
    alice, bob = master.session("alice"), master.session("bob")

    assert all(u["agent_user_group"] is None for u in admin.get("/users")["users"])
    assert admin.patch("/users/alice", {"agent_user_group": LINK})["user"]["agent_user_group"] == LINK
    assert alice.get("/me")["user"]["agent_user_group"] == LINK
    # Only an admin: not the user themselves (they would pick another user's account), not another user.
    for session, who in ((alice, "alice"), (bob, "alice"), (bob, "bob")):
        assert _refusal(session, who, {"agent_user_group": {**LINK, "agent_uid": 4321}}).startswith("403")
    assert [u["agent_user_group"] for u in admin.get("/users")["users"] if u["username"] == "alice"] == [LINK]

    # Each bad field named; root refused; nothing stored.
    bad = [({**LINK, "agent_uid": 0}, "agent_user_group.agent_uid: 0 is root's"),
           ({**LINK, "agent_gid": -5}, "agent_user_group.agent_gid: required"),
           ({**LINK, "agent_uid": True}, "agent_user_group.agent_uid: required"),
           ({k: v for k, v in LINK.items() if k != "agent_group"}, "agent_user_group.agent_group: required"),
           ({**LINK, "agent_user": "root"}, "agent_user_group.agent_user: root"),
           ({**LINK, "agent_user": "x" * 40}, "agent_user_group.agent_user: required"),
           ({**LINK, "agent_user": "a b;rm"}, "agent_user_group.agent_user: required"),
           ({**LINK, "shell": "/bin/sh"}, "agent_user_group.shell: unknown field"),
           ("alice-os", "agent_user_group: must be")]
    for body, named in bad:
        refusal = _refusal(admin, "bob", {"agent_user_group": body})
        assert refusal.startswith("400") and named in refusal, (body, refusal)
    assert [u["agent_user_group"] for u in admin.get("/users")["users"] if u["username"] == "bob"] == [None]

    assert admin.patch("/users/alice", {"agent_user_group": None})["user"]["agent_user_group"] is None  # unlinked


def test_det_user_link_with_agent_user_describe_and_list() -> None:
    det("-u", "admin", "user", "create", "carol", check=True)
    cli_fails(det("user", "link-with-agent-user", "carol", "--agent-uid", "2001", "--agent-gid", "2001",
                  "--agent-user", "carol-os", "--agent-group", "carol-os"), "only an admin")
    missing = det("-u", "admin", "user", "link-with-agent-user", "carol", "--agent-uid", "2001")
    assert missing.returncode != 0 and "--agent-gid" in missing.stderr, missing.stderr
    out = det("-u", "admin", "user", "link-with-agent-user", "carol", "--agent-uid", "2001", "--agent-gid", "2002",
              "--agent-user", "carol-os", "--agent-group", "carol-grp", check=True).stdout
    assert "carol-os" in out and "2001" in out
    assert det_json("user", "describe", "carol")["agent_user_group"] == {
        "agent_uid": 2001, "agent_gid": 2002, "agent_user": "carol-os", "agent_group": "carol-grp"}
    table = det("user", "describe", "carol", check=True).stdout
    assert "carol-grp" in table and "2002" in table
    listed = det("user", "list", check=True).stdout
    assert [line for line in listed.splitlines() if "carol" in line and "carol-os" in line and "2001" in line]
    cli_fails(det("-u", "admin", "user", "link-with-agent-user", "carol", "--agent-uid", "0", "--agent-gid", "0",
                  "--agent-user", "root", "--agent-group", "root"), "root")

    # The SDK reads and changes it (0.38's User.link_with_agent); unlinking runs carol's trials as the default again.
    user = Determined(user="admin").get_user_by_name("carol")
    assert user.agent_user_group == {"agent_uid": 2001, "agent_gid": 2002, "agent_user": "carol-os",
                                     "agent_group": "carol-grp"}
    user.link_with_agent(agent_gid=77, agent_uid=76, agent_group="carol-grp", agent_user="carol-os")
    assert user.agent_user_group is not None and user.agent_user_group["agent_uid"] == 76
    user.unlink_agent()
    assert user.agent_user_group is None and det_json("user", "describe", "carol")["agent_user_group"] is None
