"""Routes of unmanaged runs (Determined 0.38's core_v2): experiments and trials that a script run outside the
platform creates, starts and ends (determined/master/lifecycle/unmanaged.py). Metrics and checkpoints go through the trial
routes every run uses (trial_protocol.py), sent by the experiment's owner."""
from typing import Any, Dict, Optional

from fastapi import APIRouter, Request

from determined.master.lifecycle import actions, unmanaged
from determined.master.security import auth
from determined.master.registry import model_registry, workspaces
from determined.master.views import serialize
from determined.master.api._deps import master_of, problems_as_http
from determined.master.api.schemas._base import fields_of
from determined.master.api.schemas.experiments import CreateExperimentRequest, ExperimentCreated
from determined.master.api.schemas.trials import (CreateTrialRequest, PatchTrialRequest, PutTrialRequest, RunStart,
                                                 StartTrialRequest, TrialAnswer)
from determined.master.lifecycle.experiment import get_experiment, get_trial
from determined.master.problems import RequestProblem

router = APIRouter()

_EXPERIMENT_FIELDS = ("config", "unmanaged", "project_id", "activate", "model_definition", "template")
_TRIAL_FIELDS = ("experiment_id", "hparams", "unmanaged")


def create_unmanaged_experiment(request: Request, body: Any, external_id: Optional[str] = None) -> Dict[str, Any]:
    """`{config, unmanaged: true, project_id?}`: a new unmanaged experiment owned by the sender; with
    `external_id`, the experiment of that id when it exists (the sender must own it)."""
    master = master_of(request)
    fields = model_registry.check_body(body, _EXPERIMENT_FIELDS, "unmanaged experiment")
    if fields.get("unmanaged") is not True:
        raise RequestProblem(400, "invalid unmanaged experiment", [
            "unmanaged: must be true (only unmanaged experiments are created or reused here)"])
    if "config" not in fields:
        raise RequestProblem(400, "the request needs a config", ["config: required (the experiment config)"])
    if fields.get("model_definition"):
        raise RequestProblem(400, "invalid unmanaged experiment", [
            "model_definition: an unmanaged experiment has no model definition (its script runs outside the platform)"])
    if external_id is not None:
        unmanaged.check_external_id(external_id, "external_experiment_id")
    raw = fields["config"]
    if fields.get("template") is not None:
        from determined.master.registry import templates

        with master.read() as s:
            raw = templates.merge_under(s, fields["template"], raw, auth.principal_of(request))
    config = actions.canonical_config(raw, str(master.data_dir), unmanaged=True)
    storage = master.storage_problems(config.get("checkpoint_storage"))
    if storage:
        raise RequestProblem(400, "checkpoint storage this master does not allow (storage roots, S3 endpoints)", storage)
    principal = auth.principal_of(request)
    if principal.is_trial:
        raise RequestProblem(403, "a trial's token cannot create unmanaged experiments; use a user's token")
    with master.write(wake=False) as s:
        if external_id is not None:
            found = unmanaged.experiment_by_external_id(s, external_id)
            if found is not None:
                if not found.unmanaged:
                    raise RequestProblem(409, f"external_experiment_id {external_id!r} names experiment {found.id}, "
                                              "which is not unmanaged")
                auth.check_experiment_owner(principal, found, "add runs to")
                return {"experiment": serialize.experiment(s, found), "created": False}
        project = workspaces.project_for_new_experiment(s, config, fields.get("project_id"))
        exp = unmanaged.create_experiment(s, config, owner=principal.username, owner_id=principal.user_id,
                                          project_id=project.id, external_id=external_id)
        return {"experiment": serialize.experiment(s, exp), "created": True}


@router.put("/experiments/by-external-id/{external_id}", response_model=ExperimentCreated)
def put_experiment(request: Request, external_id: str,
                   body: Optional[CreateExperimentRequest] = None) -> Dict[str, Any]:
    """The unmanaged experiment of `external_id`, created when there is none (0.38's PutExperiment)."""
    with problems_as_http():
        return create_unmanaged_experiment(request, _fields(body), external_id)


def _fields(body: Any) -> Optional[Dict[str, Any]]:
    """The JSON object the client sent (None: no body)."""
    return fields_of(body) if body is not None else None


def _create_trial(request: Request, body: Any, external_id: Optional[str]) -> Dict[str, Any]:
    fields = model_registry.check_body(body, _TRIAL_FIELDS, "trial")
    if fields.get("unmanaged") is not True:
        raise RequestProblem(400, "invalid trial", ["unmanaged: must be true (only unmanaged trials are created here)"])
    exp_id = fields.get("experiment_id")
    if isinstance(exp_id, bool) or not isinstance(exp_id, int):
        raise RequestProblem(400, "invalid trial", [f"experiment_id: expected an experiment's id, got {exp_id!r}"])
    if external_id is not None:
        unmanaged.check_external_id(external_id, "external_trial_id")
    principal = auth.principal_of(request)
    with master_of(request).write(wake=False) as s:
        exp = get_experiment(s, exp_id)
        auth.check_experiment_owner(principal, exp, "add trials to")
        trial = unmanaged.create_trial(s, exp, fields.get("hparams"), external_id)
        return {"trial": serialize.trials(s, exp, [trial])[0]}


@router.post("/trials", response_model=TrialAnswer)
def create_trial(request: Request, body: Optional[CreateTrialRequest] = None) -> Dict[str, Any]:
    """`{experiment_id, hparams, unmanaged: true}`: a new trial of an unmanaged experiment (0.38's CreateTrial)."""
    with problems_as_http():
        return _create_trial(request, _fields(body), None)


@router.put("/trials", response_model=TrialAnswer)
def put_trial(request: Request, body: Optional[PutTrialRequest] = None) -> Dict[str, Any]:
    """`{create_trial_request: {...}, external_trial_id}`: that trial of the experiment, created when there is none
    (0.38's PutTrial)."""
    with problems_as_http():
        fields = model_registry.check_body(_fields(body), ("create_trial_request", "external_trial_id"), "trial")
        if "external_trial_id" not in fields:
            raise RequestProblem(400, "invalid trial", ["external_trial_id: required"])
        return _create_trial(request, fields.get("create_trial_request"), fields["external_trial_id"])


@router.post("/trials/{trial_id}/start", response_model=RunStart)
def start_trial(request: Request, trial_id: int, body: Optional[StartTrialRequest] = None) -> Dict[str, Any]:
    """A run of an unmanaged trial starts: `{trial_run_id}` and the trial's context (as `GET /trials/{id}/context`
    answers, with the checkpoint to continue from)."""
    master = master_of(request)
    with problems_as_http():
        model_registry.check_body(_fields(body), ("resume", "trial_id"), "trial start")
        with master.write(wake=False) as s:
            trial = get_trial(s, trial_id)
            auth.check_experiment_owner(auth.principal_of(request), get_experiment(s, trial.experiment_id),
                                        "start trials of")
            unmanaged.start_trial(s, trial)
            from determined.master.lifecycle import protocol

            context = protocol.trial_context(s, trial)
            context["cluster_id"] = master.cluster_id
            return context


@router.patch("/trials/{trial_id}", response_model=TrialAnswer)
def patch_trial(request: Request, trial_id: int, body: Optional[PatchTrialRequest] = None) -> Dict[str, Any]:
    """`{state}`: an unmanaged run reports its trial RUNNING, COMPLETED, ERROR or CANCELED (0.38's PatchTrial)."""
    master = master_of(request)
    with problems_as_http():
        fields = model_registry.check_body(_fields(body), ("state", "trial_id"), "trial update")
        with master.write(wake=False) as s:
            trial = get_trial(s, trial_id)
            exp = get_experiment(s, trial.experiment_id)
            auth.check_experiment_owner(auth.principal_of(request), exp, "change trials of")
            unmanaged.set_state(s, trial, fields)
            return {"trial": serialize.trials(s, exp, [trial])[0]}
