"""A custom search's runner routes (searcher events, searcher operations) are the experiment owner's (or an admin's)."""
from typing import Any

import pytest

from determined import errors

from ._helpers import InProcessMaster, add_user, model_def


def test_only_the_owner_or_an_admin_drives_a_custom_search(master: InProcessMaster) -> None:
    admin = master.session("admin")
    add_user(admin, "owner", "o-pw")
    add_user(admin, "other", "x-pw")
    owner, other = master.session("owner", "o-pw"), master.session("other", "x-pw")
    config = {"entrypoint": "model:T", "searcher": {"name": "custom", "metric": "loss"}}
    eid = owner.post("/experiments", {"config": config, "model_definition": model_def()})["experiment"]["id"]
    answer: Any = {"searcherOperations": [{"setSearcherProgress": {"progress": 0.5}}], "triggeredByEvent": {"id": 1}}
    for call in (lambda: other.get(f"/experiments/{eid}/searcher_events"),
                 lambda: other.post(f"/experiments/{eid}/searcher_operations", answer)):
        with pytest.raises(errors.APIError) as info:
            call()
        assert info.value.status_code == 403 and "owned by 'owner'" in str(info.value)
    assert owner.get(f"/experiments/{eid}/searcher_events")["searcherEvents"] == [{"id": 1, "initialOperations": {}}]
    assert admin.post(f"/experiments/{eid}/searcher_operations", answer) == {"taken": 1}
    assert owner.get(f"/experiments/{eid}")["experiment"]["progress"] == 0.5
