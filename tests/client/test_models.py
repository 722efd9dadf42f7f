"""Determined's model registry calls and Model against a really trained experiment."""
import datetime

import pytest

from determined import errors
from determined.experimental import Determined, Model, ModelOrderBy, ModelSortBy
from tests.client.conftest import Env

pytestmark = pytest.mark.slow


def test_enums_are_determineds() -> None:
    assert (ModelSortBy.NAME.value, ModelSortBy.DESCRIPTION.value, ModelSortBy.CREATION_TIME.value,
            ModelSortBy.LAST_UPDATED_TIME.value) == (1, 2, 4, 5)
    assert (ModelOrderBy.ASCENDING.value, ModelOrderBy.DESCENDING.value) == (1, 2)


def test_model_registry(env: Env) -> None:
    d = Determined()
    name = f"{env.mode}-digits"
    top = d.get_experiment(env.trained.experiment_id).top_n_checkpoints(2)

    model = d.create_model(name, description="digits MLP", metadata={"team": "vision", "stage": 1})
    assert isinstance(model, Model) and model.name == name and model.description == "digits MLP"
    assert model.metadata == {"team": "vision", "stage": 1}
    assert isinstance(model.creation_time, datetime.datetime)
    assert model.get_version() is None, "no versions yet"
    assert model.get_versions() == []

    first = model.register_version(top[0].uuid)
    assert (first.model_name, first.model_version, first.uuid) == (name, 1, top[0].uuid)
    second = model.register_version(top[1].uuid)
    assert second.model_version == 2
    latest = model.get_version()
    assert (latest.uuid, latest.model_version) == (top[1].uuid, 2)
    v1 = d.get_model(name).get_version(1)
    assert (v1.uuid, v1.model_version, v1.trial_id) == (top[0].uuid, 1, top[0].trial_id)
    assert [c.model_version for c in model.get_versions()] == [2, 1]
    assert [c.uuid for c in model.get_versions(ModelOrderBy.ASCENDING)] == [top[0].uuid, top[1].uuid]
    assert {"model_name": name, "version": 1} in d._session.get(f"/checkpoints/{top[0].uuid}")["checkpoint"]["model_versions"]
    with pytest.raises(errors.NotFoundError):
        model.get_version(7)
    with pytest.raises(ValueError, match="version"):
        model.get_version(-1)

    model.add_metadata({"stage": 2, "owner": "me"})
    assert model.metadata == {"team": "vision", "stage": 2, "owner": "me"}
    model.remove_metadata(["team", "missing"])
    assert model.metadata == {"stage": 2, "owner": "me"}
    assert d.get_model(name).metadata == {"stage": 2, "owner": "me"}, "stored by the master"
    with pytest.raises(ValueError, match="JSON"):
        model.add_metadata({"bad": object()})
    assert d.get_model(name).metadata == {"stage": 2, "owner": "me"}


def test_bad_input_stores_nothing(env: Env) -> None:
    d = Determined()
    name = f"{env.mode}-unique"
    d.create_model(name)
    count = len(d.get_models())
    with pytest.raises(errors.APIError, match=name) as e:
        d.create_model(name, description="again")
    assert e.value.status_code == 409
    with pytest.raises(ValueError, match="metadata"):
        d.create_model(f"{env.mode}-bad-metadata", metadata={"x": {1}})
    with pytest.raises(errors.APIError):
        d.create_model("has/slash")
    assert len(d.get_models()) == count and d.get_model(name).description == ""

    model = d.get_model(name)
    with pytest.raises(errors.NotFoundError, match="no-such-checkpoint"):
        model.register_version("no-such-checkpoint")
    assert d.get_model(name).get_versions() == [] and d.get_model(name).num_versions == 0
    with pytest.raises(errors.NotFoundError, match="no-such-model"):
        d.get_model("no-such-model")
    with pytest.raises(errors.NotFoundError):
        Model("no-such-model", master=env.url or "").register_version("whatever")


def test_get_models_sorts_and_filters(env: Env) -> None:
    d = Determined()
    prefix = f"{env.mode}-sort"
    d.create_model(f"{prefix}-b", description="beta model")
    d.create_model(f"{prefix}-a", description="zeta")
    d.create_model(f"{prefix}-c", description="alpha beta")
    mine = lambda models: [m.name for m in models if m.name.startswith(prefix)]  # noqa: E731

    assert mine(d.get_models()) == [f"{prefix}-a", f"{prefix}-b", f"{prefix}-c"]
    assert mine(d.get_models(order_by=ModelOrderBy.DESCENDING)) == [f"{prefix}-c", f"{prefix}-b", f"{prefix}-a"]
    assert mine(d.get_models(sort_by=ModelSortBy.CREATION_TIME)) == [f"{prefix}-b", f"{prefix}-a", f"{prefix}-c"]
    assert mine(d.get_models(sort_by=ModelSortBy.DESCRIPTION)) == [f"{prefix}-c", f"{prefix}-b", f"{prefix}-a"]
    assert [m.name for m in d.get_models(name=f"{prefix}-")] == [f"{prefix}-a", f"{prefix}-b", f"{prefix}-c"]
    assert mine(d.get_models(description="BETA")) == [f"{prefix}-b", f"{prefix}-c"]
    assert d.get_models(name="nothing-has-this-name") == []
    with pytest.raises(ValueError, match="sort_by"):
        d.get_models(sort_by="size")  # type: ignore[arg-type]
