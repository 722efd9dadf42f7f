"""Issue 33 (with templates' rule, registry/templates.py `check_usable`): forking or continuing another user's
experiment must not hand the caller that user's secrets. There is no server-side fork here: a fork (the CLI's or
the web UI's) reads the experiment's config, which every answer gives redacted, and submits it as the caller's
own; continuing (`POST /experiments/{id}/continue`) is the owner's or an admin's, and the trials stay the owner's.
These guard that: they held before issue 33's work, and must keep holding."""
from typing import Any, Dict

import pytest

from determined import errors
from determined.common.api import Session

from ._helpers import InProcessMaster, add_user
from tests.master._helpers import config, model_def

SECRETS = ("alice-s3-secret", "AKIAALICE", "alice-hf-token", "alice-env-token")


def _alice_config() -> Dict[str, Any]:
    return {**config(), "checkpoint_storage": {"type": "s3", "bucket": "alice-bucket", "access_key": "AKIAALICE",
                                               "secret_key": "alice-s3-secret"},
            "data": {"secrets": {"hf_token": "alice-hf-token"}},
            "environment": {"environment_variables": ["HF_TOKEN=alice-env-token"]}}


def _stored(master: InProcessMaster, experiment_id: int) -> str:
    from determined.master.db import Experiment

    with master.master.read() as s:
        return repr(s.get(Experiment, experiment_id).config)


@pytest.fixture
def sessions(master: InProcessMaster) -> Dict[str, Session]:
    admin = master.session("admin")
    add_user(admin, "alice", "alice-pw")
    add_user(admin, "bob", "bob-pw")
    return {"admin": admin, "alice": master.session("alice", "alice-pw"), "bob": master.session("bob", "bob-pw")}


def test_bob_cannot_continue_alices_experiment_and_a_fork_carries_no_secret(
        master: InProcessMaster, sessions: Dict[str, Session]) -> None:
    alice_exp = sessions["alice"].post("/experiments", {"config": _alice_config(), "model_definition": model_def(),
                                                         "activate": False})["experiment"]["id"]
    assert all(secret in _stored(master, alice_exp) for secret in SECRETS)  # the owner's trials get them
    with pytest.raises(errors.APIError) as info:
        sessions["bob"].post(f"/experiments/{alice_exp}/continue", {"override_config": {"max_restarts": 1}})
    assert info.value.status_code == 403 and "owned by 'alice'" in str(info.value)
    assert not any(secret in str(info.value) for secret in SECRETS)

    # A fork as the CLI and the web UI make it: the config as bob reads it, submitted as his own experiment.
    seen = sessions["bob"].get(f"/experiments/{alice_exp}")["experiment"]["config"]
    assert not any(secret in repr(seen) for secret in SECRETS)
    bob_exp = sessions["bob"].post("/experiments", {"config": seen, "model_definition": model_def(),
                                                     "activate": False})["experiment"]["id"]
    stored = _stored(master, bob_exp)
    assert not any(secret in stored for secret in SECRETS), stored
