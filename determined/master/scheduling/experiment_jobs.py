"""Experiments as jobs of the queue: one job per active experiment (all its trials), Determined's TYPE_EXPERIMENT."""
from typing import Dict, List, Mapping

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from determined.master.db import Experiment, Project, SearcherOperation, Trial
from determined.master.lifecycle import states
from determined.master.lifecycle.actions import config_value
from determined.master.lifecycle.experiment import runs_own_loop
from determined.master.scheduling import jobs as jq
from determined.master.scheduling import pools, queue_positions


def priority_of(exp: Experiment, pool: pools.Pool) -> int:
    value = config_value(exp.config, "resources", "priority", default=None)
    return int(value) if value else pool.scheduler.default_priority


def weight_of(exp: Experiment) -> float:
    return float(config_value(exp.config, "resources", "weight", default=1) or 1)


def slots_per_trial(exp: Experiment) -> int:
    return int(config_value(exp.config, "resources", "slots_per_trial", default=1))


def pool_name_of(exp: Experiment) -> str:
    return str(config_value(exp.config, "resources", "resource_pool", default="") or "")


class ExperimentJobs:
    """The JobSource of experiments."""

    job_types = (jq.TYPE_EXPERIMENT,)

    def jobs(self, s: Session) -> List[jq.Job]:
        exps = list(s.execute(
            select(Experiment.id, Experiment.config, Experiment.owner, Experiment.start_time, Experiment.progress,
                   Project.workspace_id)
            .outerjoin(Project, Project.id == Experiment.project_id)
            .where(Experiment.state == states.ACTIVE, Experiment.unmanaged.is_not(True))))
        if not exps:
            return []
        ids = [row.id for row in exps]
        running: Dict[int, int] = dict(s.execute(  # type: ignore[arg-type]
            select(Trial.experiment_id, func.count()).where(Trial.experiment_id.in_(ids), Trial.allocation_id.is_not(None))
            .group_by(Trial.experiment_id)).all())
        has_work = select(SearcherOperation.id).where(SearcherOperation.trial_id == Trial.id,
                                                      SearcherOperation.completed.is_(False)).exists()
        own_loop = [row.id for row in exps if runs_own_loop(row)]  # type: ignore[arg-type]
        waiting: Dict[int, int] = dict(s.execute(  # type: ignore[arg-type]
            select(Trial.experiment_id, func.count()).where(
                Trial.experiment_id.in_(ids), Trial.state == states.ACTIVE, Trial.allocation_id.is_(None),
                has_work | Trial.close_requested.is_(True) | Trial.experiment_id.in_(own_loop))
            .group_by(Trial.experiment_id)).all())
        cluster = pools.of_session(s)
        positions = queue_positions.all_positions(s)
        out: List[jq.Job] = []
        for row in exps:
            config = row.config or {}
            pool = cluster.pool_for(pool_name_of(row))  # type: ignore[arg-type]
            per_trial = int(config_value(config, "resources", "slots_per_trial", default=1))
            held, wanted = running.get(row.id, 0), running.get(row.id, 0) + waiting.get(row.id, 0)
            max_slots = int(config_value(config, "resources", "max_slots", default=0) or 0)
            requested = wanted * per_trial
            if max_slots:
                requested = min(requested, max(max_slots, held * per_trial))
            entity = str(row.id)
            job_id = jq.job_id_of(jq.TYPE_EXPERIMENT, entity)
            out.append(jq.Job(
                job_id=job_id, type=jq.TYPE_EXPERIMENT, entity_id=entity,
                name=str(config.get("name") or f"Experiment {row.id}"), username=row.owner or "",
                workspace_id=row.workspace_id, resource_pool=pool.name, submission_time=row.start_time,
                priority=priority_of(row, pool), weight=weight_of(row),  # type: ignore[arg-type]
                requested_slots=requested, allocated_slots=held * per_trial,
                is_preemptible=pool.scheduler.preempts,
                state=jq.STATE_SCHEDULED if held else jq.STATE_QUEUED,
                queue_position=positions.get(job_id), progress=float(row.progress or 0.0)))
        return out

    def owner_of(self, s: Session, job: jq.Job) -> str:
        return job.username

    def _experiment(self, s: Session, job: jq.Job) -> Experiment:
        exp = s.get(Experiment, int(job.entity_id))
        assert exp is not None
        return exp

    def set_priority(self, s: Session, job: jq.Job, priority: int) -> None:
        exp = self._experiment(s, job)
        exp.config = {**exp.config, "resources": {**(exp.config.get("resources") or {}), "priority": priority}}

    def set_weight(self, s: Session, job: jq.Job, weight: float) -> None:
        exp = self._experiment(s, job)
        exp.config = {**exp.config, "resources": {**(exp.config.get("resources") or {}), "weight": weight}}

    def set_resource_pool(self, s: Session, job: jq.Job, pool: str) -> None:
        exp = self._experiment(s, job)
        exp.config = {**exp.config, "resources": {**(exp.config.get("resources") or {}), "resource_pool": pool}}

    def set_queue_position(self, s: Session, job: jq.Job, position: float) -> None:
        queue_positions.set_position(s, job.job_id, position)


def position_of(exp: Experiment, positions: Mapping[str, float]) -> float:
    """The queue position of an experiment: the one --ahead-of/--behind-of set (`positions`, from
    `queue_positions.all_positions`), else its submission time (the order `jobs.queue_order` lists)."""
    explicit = positions.get(jq.job_id_of(jq.TYPE_EXPERIMENT, str(exp.id))) if positions else None
    return explicit if explicit is not None else exp.start_time.timestamp()


jq.register_source(ExperimentJobs())
