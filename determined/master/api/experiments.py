"""Experiment routes of the CLI and SDK: create, list, describe, activate/pause/cancel/kill, checkpoints."""
from typing import Any, Dict, List, Optional

from fastapi import APIRouter, Body, Query, Request
from sqlalchemy import select

from determined.master import actions, serialize
from determined.master.api._deps import master_of, problems_as_http
from determined.master.db import Checkpoint, Experiment
from determined.master.experiment import get_experiment, trials_of
from determined.master.model_def import decode_model_def
from determined.master.problems import RequestProblem

router = APIRouter()


@router.post("/experiments")
def create_experiment(request: Request, body: Dict[str, Any] = Body(...)) -> Dict[str, Any]:
    master = master_of(request)
    with problems_as_http():
        if "config" not in body:
            raise RequestProblem(400, "the request needs a config", ["config: required (the experiment config as an object)"])
        config = actions.canonical_config(body["config"], str(master.data_dir))
        model_def = decode_model_def(body.get("model_definition"), config.get("entrypoint"))
        total = master.total_slots()
        if total is not None and slots_per_trial_from(config) > total:
            raise RequestProblem(400, "invalid experiment config", [
                f"resources.slots_per_trial: {slots_per_trial_from(config)} slots per trial, but this master has only "
                f"{total} slot(s); lower slots_per_trial (CPU slots can be raised with DET_CPU_SLOTS)"])
        with master.write() as s:
            exp = actions.create_experiment(s, config, model_def, activate=bool(body.get("activate", True)))
            s.flush()
            answer = serialize.experiment(s, exp)
    return {"experiment": answer}


def slots_per_trial_from(config: Dict[str, Any]) -> int:
    return int(actions.config_value(config, "resources", "slots_per_trial", default=1))


@router.get("/experiments")
def list_experiments(request: Request) -> Dict[str, Any]:
    with master_of(request).read() as s:
        exps = s.scalars(select(Experiment).order_by(Experiment.id))
        return {"experiments": [serialize.experiment(s, e) for e in exps]}


@router.get("/experiments/{experiment_id}")
def describe_experiment(request: Request, experiment_id: int) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).read() as s:
        exp = get_experiment(s, experiment_id)
        return {"experiment": serialize.experiment(s, exp), "trials": [serialize.trial(t) for t in trials_of(s, exp.id)]}


def _action(request: Request, experiment_id: int, action: Any) -> Dict[str, Any]:
    master = master_of(request)
    with problems_as_http(), master.write() as s:
        exp = action(s, experiment_id)
        s.flush()
        return {"experiment": serialize.experiment(s, exp)}


@router.post("/experiments/{experiment_id}/activate")
def activate(request: Request, experiment_id: int) -> Dict[str, Any]:
    return _action(request, experiment_id, actions.activate)


@router.post("/experiments/{experiment_id}/pause")
def pause(request: Request, experiment_id: int) -> Dict[str, Any]:
    return _action(request, experiment_id, actions.pause)


@router.post("/experiments/{experiment_id}/cancel")
def cancel(request: Request, experiment_id: int) -> Dict[str, Any]:
    return _action(request, experiment_id, actions.cancel)


@router.post("/experiments/{experiment_id}/kill")
def kill(request: Request, experiment_id: int) -> Dict[str, Any]:
    return _action(request, experiment_id, actions.kill)


@router.get("/experiments/{experiment_id}/checkpoints")
def experiment_checkpoints(request: Request, experiment_id: int,
                           states: Optional[List[str]] = Query(default=None)) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).read() as s:
        get_experiment(s, experiment_id)
        query = select(Checkpoint).where(Checkpoint.experiment_id == experiment_id)
        if states:
            query = query.where(Checkpoint.state.in_(states))
        return {"checkpoints": [serialize.checkpoint(s, c) for c in s.scalars(query.order_by(Checkpoint.id))]}


@router.get("/experiments/{experiment_id}/model_def")
def model_def(request: Request, experiment_id: int) -> Dict[str, Any]:
    import base64

    with problems_as_http(), master_of(request).read() as s:
        exp = get_experiment(s, experiment_id)
        return {"b64_tgz": base64.b64encode(exp.model_def).decode("ascii")}
