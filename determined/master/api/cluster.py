"""GET /cluster/slots: the master's slots and the trial runs holding them."""
from typing import Any, Dict, List, Optional, Tuple

from fastapi import APIRouter, Request
from sqlalchemy import select

from determined.master.api._deps import master_of
from determined.master.api.schemas.cluster import ClusterSlots
from determined.master.db import Experiment, Trial
from determined.master.lifecycle import trial_status
from determined.master.rm.base import describe_run
from determined.master.scheduling.scheduler import slots_per_trial
from determined.master.views.dbread import reader_of

router = APIRouter()


@router.get("/cluster/slots", response_model=ClusterSlots)
def cluster_slots(request: Request) -> Dict[str, Any]:
    """`{"total", "kind", "used", "allocations": [{allocation_id, trial_id, experiment_id, owner, slots, ...}]}`.

    Each allocation has `slot_ids`, `pid` (null when the process is on another machine, e.g. a Ray node) and
    `nodes` (the IPs of the Ray nodes of its ranks; empty for the local resource manager).

    `total` and `kind` are null when no scheduler runs (a master opened in-process only to read); the runs
    then come from the database alone, and `slots` is the slot count the trial asks for.
    """
    master = master_of(request)
    rm = master.rm
    processes = rm.running() if rm is not None else {}
    allocations: List[Dict[str, Any]] = []
    with master.read() as s:
        rows = list(s.execute(select(Trial, Experiment).join(Experiment, Experiment.id == Trial.experiment_id)
                              .where(Trial.allocation_id.is_not(None)).order_by(Trial.id)))
        # What each trial does (RUNNING, WAITING with its slot, STOPPING...): its stored state, ACTIVE, says only
        # that it has not ended.
        status: Dict[int, Tuple[str, Optional[str]]] = {}
        by_experiment: Dict[int, Tuple[Experiment, List[Trial]]] = {}
        for trial, exp in rows:
            by_experiment.setdefault(exp.id, (exp, []))[1].append(trial)
        for exp, trials in by_experiment.values():
            status.update(trial_status.statuses(reader_of(s), exp, trials))
        for trial, exp in rows:
            proc = processes.get(str(trial.allocation_id))
            run = describe_run(proc) if proc is not None else {"slot_ids": [], "pid": None, "nodes": []}
            slot_ids = run["slot_ids"]
            allocations.append({
                "allocation_id": trial.allocation_id,
                "trial_id": trial.id,
                "experiment_id": exp.id,
                "owner": exp.owner,
                "description": (exp.config or {}).get("description") or "",
                "trial_state": trial.state,
                "trial_status": status.get(trial.id, (trial.state, None))[0],
                "trial_status_reason": status.get(trial.id, (trial.state, None))[1],
                "experiment_state": exp.state,
                "slots": len(slot_ids) if proc is not None else slots_per_trial(exp),
                "slot_ids": slot_ids,
                "pid": run["pid"],
                "nodes": run["nodes"],
            })
    used = sum(a["slots"] for a in allocations)
    return {
        "total": rm.total_slots if rm is not None else None,
        "kind": rm.slots.kind if rm is not None else None,
        "used": used,
        "allocations": allocations,
    }
