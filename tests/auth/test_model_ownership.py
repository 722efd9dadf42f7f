"""Models and checkpoint metadata follow the ownership rules of experiments: the owner or an admin changes them,
everyone reads them; models made before owners existed go to the admin (migration 0006)."""
import datetime
import pathlib
import uuid
from typing import Any, Dict

import pytest
from sqlalchemy import text

from determined import errors
from determined.master.lifecycle import states
from determined.master.db import Checkpoint, default_db_url, make_engine, upgrade

from ._helpers import InProcessMaster, add_user, create_experiment


def refused(call: Any, *args: Any) -> str:
    with pytest.raises(errors.APIError) as info:
        call(*args)
    assert info.value.status_code == 403, str(info.value)
    return str(info.value)


def add_checkpoint(master: InProcessMaster, experiment_id: int, trial_id: int, metadata: Dict[str, Any]) -> str:
    """A COMPLETED checkpoint row of the trial, as a trial's report leaves it."""
    ckpt_uuid = str(uuid.uuid4())
    with master.master.write() as s:
        s.add(Checkpoint(uuid=ckpt_uuid, experiment_id=experiment_id, trial_id=trial_id, state=states.COMPLETED,
                         steps_completed=5, resources={"w.pt": 10}, framework="", format="", metadata_=metadata,
                         determined_version="test"))
    return ckpt_uuid


@pytest.fixture
def team(master: InProcessMaster) -> Dict[str, Any]:
    admin = master.session("admin")
    add_user(admin, "alice", "a-pw")
    add_user(admin, "bob", "b-pw")
    return {"admin": admin, "alice": master.session("alice", "a-pw"), "bob": master.session("bob", "b-pw")}


def test_only_the_owner_or_an_admin_changes_a_model_and_checkpoint_metadata(master: InProcessMaster,
                                                                            team: Dict[str, Any]) -> None:
    alice, bob, admin = team["alice"], team["bob"], team["admin"]
    exp = create_experiment(alice, max_trials=1)
    trial_id = alice.get(f"/experiments/{exp['id']}")["trials"][0]["id"]
    ckpt = add_checkpoint(master, exp["id"], trial_id, {"framework": "torch", "note": "best"})
    model = alice.post("/models/alices-model", {"description": "hers", "metadata": {"task": "digits"}})["model"]
    assert model["owner"] == "alice"
    alice.post("/models/alices-model/versions", {"checkpoint_uuid": ckpt})

    # bob, as the issue found him: description, metadata, versions; removing and adding checkpoint metadata
    for call, args in [(bob.patch, ("/models/alices-model", {"description": "bob was here"})),
                       (bob.patch, ("/models/alices-model", {"metadata": {}})),
                       (bob.post, ("/models/alices-model/versions", {"checkpoint_uuid": ckpt})),
                       (bob.delete, (f"/checkpoints/{ckpt}/metadata?keys=note&keys=framework",)),
                       (bob.post, (f"/checkpoints/{ckpt}/metadata", {"metadata": {"note": "worst"}}))]:
        message = refused(call, *args)
        assert "'alice'" in message and "(you are 'bob')" in message, message
    refused(alice.patch, "/models/alices-model", {"owner": "bob"})  # only an admin hands a model over
    # nothing changed, and everyone still reads it all
    seen = bob.get("/models/alices-model")["model"]
    assert (seen["description"], seen["metadata"], seen["num_versions"]) == ("hers", {"task": "digits"}, 1)
    assert bob.get(f"/checkpoints/{ckpt}")["checkpoint"]["metadata"] == {"framework": "torch", "note": "best"}

    # the owner and an admin may
    alice.patch("/models/alices-model", {"description": "still hers"})
    assert alice.post(f"/checkpoints/{ckpt}/metadata", {"metadata": {"epoch": 3}})["checkpoint"]["metadata"] == {
        "framework": "torch", "note": "best", "epoch": 3}
    assert admin.delete(f"/checkpoints/{ckpt}/metadata?keys=note")["checkpoint"]["metadata"] == {
        "framework": "torch", "epoch": 3}
    assert admin.post("/models/alices-model/versions", {"checkpoint_uuid": ckpt})["version"]["version"] == 2
    # an admin hands the model to bob, who may then change it
    assert admin.patch("/models/alices-model", {"owner": "bob"})["model"]["owner"] == "bob"
    assert bob.patch("/models/alices-model", {"description": "bob's now"})["model"]["description"] == "bob's now"
    refused(alice.patch, "/models/alices-model", {"description": "mine again?"})
    with pytest.raises(errors.APIError) as info:
        admin.patch("/models/alices-model", {"owner": "nobody"})
    assert info.value.status_code == 400 and "not a user" in str(info.value)


def test_models_made_before_owners_belong_to_the_admin(tmp_path: pathlib.Path) -> None:
    engine = make_engine(default_db_url(tmp_path))
    upgrade(engine, "0004")
    now = datetime.datetime(2024, 1, 1)
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO users (username, password_hash, admin, active, created_at) "
                          "VALUES ('root2', '', :t, :t, :now)"), {"t": True, "now": now})
        conn.execute(text("INSERT INTO models (name, description, metadata, creation_time, last_updated_time) "
                          "VALUES ('old', 'from before', '{}', :now, :now)"), {"now": now})
    upgrade(engine)
    with engine.connect() as conn:
        row = conn.execute(text("SELECT m.owner, u.username FROM models m JOIN users u ON u.id = m.owner_id")).one()
        assert tuple(row) == ("admin", "admin")
        assert conn.execute(text("SELECT description FROM models")).scalar() == "from before"
    engine.dispose()
