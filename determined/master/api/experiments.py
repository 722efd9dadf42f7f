"""Experiment routes of the CLI and SDK: create, list, describe, update, activate/pause/cancel/kill, checkpoints, GC."""
from typing import Any, Dict, Optional

from fastapi import APIRouter, Depends, Request

from determined.config.entrypoint import runs_native
from determined.config.storage import with_gc_policy
from determined.master.lifecycle import actions, experiment_edits, protocol, states
from determined.master.security import auth
from determined.master.storage import gc
from determined.master.views import serialize
from determined.master.registry import model_registry, templates, workspaces
from determined.master.scheduling import bindings, pools
from determined.master.api._deps import master_of, problems_as_http
from determined.master.api.schemas._base import fields_of
from determined.master.api.schemas.experiments import (ContinueExperimentRequest, CreateExperimentRequest,
                                                      ExperimentAnswer, ExperimentCreated, ExperimentDeleted,
                                                      ExperimentUpdated, GcPreview, ModelDefinition, PatchExperimentRequest,
                                                      TensorboardFilesDeleted)
from determined.master.lifecycle.experiment import get_experiment
from determined.master.lifecycle.model_def import decode_model_def
from determined.master.problems import RequestProblem

router = APIRouter()


@router.post("/experiments", response_model=ExperimentCreated, response_model_exclude_unset=True)
def create_experiment(request: Request, request_body: CreateExperimentRequest) -> Dict[str, Any]:
    master = master_of(request)
    body = fields_of(request_body)
    with problems_as_http():
        if body.get("unmanaged") is not None and body.get("unmanaged") is not False:
            from determined.master.api.unmanaged import create_unmanaged_experiment

            return create_unmanaged_experiment(request, body)  # a script run outside the platform (core_v2)
        if "config" not in body:
            raise RequestProblem(400, "the request needs a config", ["config: required (the experiment config as an object)"])
        raw = body["config"]
        if body.get("template") is not None:  # a stored template under the config (Determined 0.38's merge)
            with master.read() as s:
                raw = templates.merge_under(s, body["template"], raw, auth.principal_of(request))
        config = actions.canonical_config(raw, str(master.data_dir))
        storage = master.storage_problems(config.get("checkpoint_storage"))
        if storage:
            raise RequestProblem(400, "checkpoint storage this master does not allow (storage roots, S3 endpoints)", storage)
        scheduling = pools.submission_problems(master.pools, config, admin=auth.principal_of(request).admin)
        if scheduling:  # a pool this master does not have, a priority above the master's priority_limit
            raise RequestProblem(400, "invalid experiment config", scheduling)
        model_def = decode_model_def(body.get("model_definition"), config.get("entrypoint"),
                                     resolve_entrypoint=not runs_native(config))
        with master.read() as s:  # the pool it will run in (a workspace's default pool): what the RM checks
            placed = bindings.place_experiment(s, master.pools, config, workspaces.project_for_new_experiment(
                s, config, body.get("project_id")).workspace_id)
        check = getattr(master.rm, "check_experiment", None)  # a resource manager's own checks (Ray: rm/ray.py)
        total = master.total_slots()
        if check is not None:
            problems = check(placed)
            if problems:
                raise RequestProblem(400, "this experiment cannot run on the master's cluster", problems)
        elif total is not None and slots_per_trial_from(config) > total:
            raise RequestProblem(400, "invalid experiment config", [
                f"resources.slots_per_trial: {slots_per_trial_from(config)} slots per trial, but this master has only "
                f"{total} slot(s); lower slots_per_trial (CPU slots can be raised with DET_CPU_SLOTS)"])
        principal = auth.principal_of(request)
        with master.write() as s:
            project = workspaces.project_for_new_experiment(s, config, body.get("project_id"))
            # the pool must be available to the workspace (bindings); none named: the workspace's default pool
            config = bindings.place_experiment(s, master.pools, config, project.workspace_id)
            exp = actions.create_experiment(s, config, model_def, activate=bool(body.get("activate", True)),
                                            owner=principal.username)
            exp.owner_id = principal.user_id
            exp.project_id = project.id
            s.flush()
            answer = serialize.experiment(s, exp)
    return {"experiment": answer}


def slots_per_trial_from(config: Dict[str, Any]) -> int:
    return int(actions.config_value(config, "resources", "slots_per_trial", default=1))


def _action(request: Request, experiment_id: int, action: Any) -> Dict[str, Any]:
    master = master_of(request)
    with problems_as_http():
        with master.write() as s:
            exp = action(s, experiment_id)
            s.flush()
            ended = exp.state in states.EXPERIMENT_TERMINAL and not exp.checkpoint_gc_done
        if ended and not master.run_scheduler:
            gc.run_gc(master, experiment_id)  # an in-process master has no loop that would collect it later
        with master.read() as s:
            return {"experiment": serialize.experiment(s, get_experiment(s, experiment_id))}


@router.post("/experiments/{experiment_id}/activate", response_model=ExperimentAnswer,
             dependencies=[Depends(auth.experiment_owner_only)])
def activate(request: Request, experiment_id: int) -> Dict[str, Any]:
    return _action(request, experiment_id, actions.activate)


@router.post("/experiments/{experiment_id}/pause", response_model=ExperimentAnswer,
             dependencies=[Depends(auth.experiment_owner_only)])
def pause(request: Request, experiment_id: int) -> Dict[str, Any]:
    return _action(request, experiment_id, actions.pause)


@router.post("/experiments/{experiment_id}/cancel", response_model=ExperimentAnswer,
             dependencies=[Depends(auth.experiment_owner_only)])
def cancel(request: Request, experiment_id: int) -> Dict[str, Any]:
    return _action(request, experiment_id, actions.cancel)


@router.post("/experiments/{experiment_id}/kill", response_model=ExperimentAnswer,
             dependencies=[Depends(auth.experiment_owner_only)])
def kill(request: Request, experiment_id: int) -> Dict[str, Any]:
    return _action(request, experiment_id, actions.kill)


@router.post("/experiments/{experiment_id}/archive", response_model=ExperimentAnswer,
             dependencies=[Depends(auth.experiment_owner_only)])
def archive(request: Request, experiment_id: int) -> Dict[str, Any]:
    """Archive an ended experiment: `det experiment list` hides it unless --all."""
    return _action(request, experiment_id, actions.archive)


@router.post("/experiments/{experiment_id}/unarchive", response_model=ExperimentAnswer,
             dependencies=[Depends(auth.experiment_owner_only)])
def unarchive(request: Request, experiment_id: int) -> Dict[str, Any]:
    return _action(request, experiment_id, actions.unarchive)


@router.get("/experiments/{experiment_id}/preview_gc", response_model=GcPreview)
def preview_gc(request: Request, experiment_id: int, save_experiment_best: Optional[str] = None,
               save_trial_best: Optional[str] = None, save_trial_latest: Optional[str] = None) -> Dict[str, Any]:
    """What GC would delete and keep under the given settings (a setting left out = the experiment's own)."""
    given = {"save_experiment_best": save_experiment_best, "save_trial_best": save_trial_best,
             "save_trial_latest": save_trial_latest}
    with problems_as_http(), master_of(request).read() as s:
        overrides = gc.check_policy({k: _int_or_text(v) for k, v in given.items() if v is not None}, field="")
        exp = get_experiment(s, experiment_id)
        delete, keep = gc.checkpoints_to_delete(s, exp, gc.gc_policy(exp, overrides))
        return {"delete": [serialize.checkpoint(s, c) for c in delete], "keep": [serialize.checkpoint(s, c) for c in keep]}


def _int_or_text(value: str) -> Any:
    try:
        return int(value)
    except ValueError:
        return value


@router.patch("/experiments/{experiment_id}", response_model=ExperimentUpdated,
               dependencies=[Depends(auth.experiment_owner_only)])
def patch_experiment(request: Request, experiment_id: int,
                     body: Optional[PatchExperimentRequest] = None) -> Dict[str, Any]:
    """Change the GC settings (`{"checkpoint_storage": {"save_*": N}}`; an ended experiment is collected at once),
    the name, description, labels, notes, and `resources` `max_slots`/`weight`/`priority`."""
    master = master_of(request)
    with problems_as_http():
        fields = model_registry.check_body(fields_of(body) if body is not None else None,
                                           ("checkpoint_storage",) + experiment_edits.FIELDS, "experiment update")
        problems = experiment_edits.check_update(fields)
        priority = (fields.get("resources") or {}).get("priority") if isinstance(fields.get("resources"), dict) else None
        if not problems and isinstance(priority, int):  # the master's priority_limit holds for non-admins
            limit = master.pools.priority_problem(priority, admin=auth.principal_of(request).admin)
            problems += [limit] if limit else []
        if problems:
            raise RequestProblem(400, "invalid experiment update", problems)
        policy = gc.check_policy(fields["checkpoint_storage"]) if "checkpoint_storage" in fields else {}
        with master.write() as s:
            exp = get_experiment(s, experiment_id)
            experiment_edits.apply_update(exp, fields)
            if policy:
                exp.config = {**exp.config,
                              "checkpoint_storage": with_gc_policy(exp.config.get("checkpoint_storage") or {}, **policy)}
            terminal = exp.state in states.EXPERIMENT_TERMINAL
        settings_only = bool(set(fields) - {"checkpoint_storage"})  # a rename or new labels collects nothing
        deleted = gc.run_gc(master, experiment_id) if terminal and not settings_only else []
        with master.read() as s:
            return {"experiment": serialize.experiment(s, get_experiment(s, experiment_id)), "deleted": deleted}


@router.post("/experiments/{experiment_id}/continue", response_model=ExperimentAnswer,
             dependencies=[Depends(auth.experiment_owner_only)])
def continue_experiment(request: Request, experiment_id: int,
                        body: Optional[ContinueExperimentRequest] = None) -> Dict[str, Any]:
    """Continue an ended single/random/grid experiment (`{"override_config": {...}}`, single only): its trials
    that did not complete train on from their latest checkpoint."""
    master = master_of(request)
    with problems_as_http():
        fields = model_registry.check_body(fields_of(body) if body is not None else None, ("override_config",),
                                           "continue")
        with master.write() as s:
            exp = experiment_edits.continue_experiment(s, experiment_id, fields.get("override_config"),
                                                       str(master.data_dir))
            storage = master.storage_problems(exp.config.get("checkpoint_storage"))
            if storage:
                raise RequestProblem(400, "checkpoint storage this master does not allow (storage roots, S3 endpoints)", storage)
            s.flush()
            return {"experiment": serialize.experiment(s, exp)}


@router.delete("/experiments/{experiment_id}", response_model=ExperimentDeleted,
               dependencies=[Depends(auth.experiment_owner_only)])
def delete_experiment(request: Request, experiment_id: int) -> Dict[str, Any]:
    """Delete an ended experiment, its checkpoints' files and everything it stored (refused while a checkpoint of
    it is a registered model version)."""
    with problems_as_http():
        deleted = experiment_edits.delete_experiment(master_of(request), experiment_id, auth.principal_of(request))
    return {"deleted_checkpoints": deleted}


@router.delete("/experiments/{experiment_id}/tensorboard-files", response_model=TensorboardFilesDeleted,
               dependencies=[Depends(auth.experiment_owner_only)])
def delete_tensorboard_files(request: Request, experiment_id: int) -> Dict[str, Any]:
    """Remove the TensorBoard event files of the experiment's trials (its owner or an admin)."""
    from determined.master.insights import tensorboard

    return {"deleted": tensorboard.delete_event_files(master_of(request).data_dir, experiment_id)}


@router.get("/experiments/{experiment_id}/model_def", response_model=ModelDefinition)
def model_def(request: Request, experiment_id: int) -> Dict[str, Any]:
    with problems_as_http(), master_of(request).read() as s:
        return protocol.model_def_answer(get_experiment(s, experiment_id))
