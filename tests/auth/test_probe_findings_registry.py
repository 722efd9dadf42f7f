"""Issue 33, finding 8: registering another user's checkpoint in your model blocked her deleting her experiment.

As in Determined, an experiment whose checkpoints are model versions cannot be deleted; so only who may delete the
experiment (its owner or an admin) may register its checkpoints. Bob can no longer pin Alice's experiment.
"""
from typing import Any, Dict

import pytest

from determined import errors

from ._helpers import InProcessMaster, add_user, create_experiment
from .test_model_ownership import add_checkpoint


@pytest.fixture
def team(master: InProcessMaster) -> Dict[str, Any]:
    admin = master.session("admin")
    add_user(admin, "alice", "a-pw")
    add_user(admin, "bob", "b-pw")
    return {"admin": admin, "alice": master.session("alice", "a-pw"), "bob": master.session("bob", "b-pw")}


def _alices_checkpoint(master: InProcessMaster, alice: Any) -> Dict[str, Any]:
    exp = create_experiment(alice, max_trials=1)
    trial_id = alice.get(f"/experiments/{exp['id']}")["trials"][0]["id"]
    alice.post(f"/experiments/{exp['id']}/kill")
    return {"experiment": exp["id"], "uuid": add_checkpoint(master, exp["id"], trial_id, {})}


def test_bob_cannot_register_alices_checkpoint_so_she_can_delete_her_experiment(master: InProcessMaster,
                                                                              team: Dict[str, Any]) -> None:
    alice, bob = team["alice"], team["bob"]
    mine = _alices_checkpoint(master, alice)
    bob.post("/models/bobs-model", {})
    with pytest.raises(errors.APIError) as info:
        bob.post("/models/bobs-model/versions", {"checkpoint_uuid": mine["uuid"]})
    message = str(info.value)
    assert info.value.status_code == 403 and mine["uuid"] in message and "'alice'" in message
    assert "(you are 'bob')" in message and "keeps its experiment from being deleted" in message
    assert bob.get("/models/bobs-model")["model"]["num_versions"] == 0
    alice.delete(f"/experiments/{mine['experiment']}")
    with pytest.raises(errors.APIError) as gone:
        alice.get(f"/experiments/{mine['experiment']}")
    assert gone.value.status_code == 404


def test_the_owner_and_an_admin_register_and_deletion_is_then_refused(master: InProcessMaster,
                                                                      team: Dict[str, Any]) -> None:
    alice, admin = team["alice"], team["admin"]
    mine = _alices_checkpoint(master, alice)
    admin.post("/models/admins-model", {})
    admin.post("/models/admins-model/versions", {"checkpoint_uuid": mine["uuid"]})
    alice.post("/models/alices-model", {})
    alice.post("/models/alices-model/versions", {"checkpoint_uuid": mine["uuid"]})
    with pytest.raises(errors.APIError) as info:
        alice.delete(f"/experiments/{mine['experiment']}")
    assert info.value.status_code == 400 and "delete those model versions first" in str(info.value)
