"""Which running trials the priority scheduler preempts for a pending job of higher priority (pools with
`preemption: true`): the lowest priority first, the newest first, just enough, never twice for one need, never
when it cannot make room; and the freed slots go to the pending job, not back to the trials that gave them up."""
import pathlib
from typing import Iterator, List

import pytest
from sqlalchemy.orm import Session

from determined.master.db import default_db_url, make_engine, upgrade
from determined.master.db.models import Experiment, SearcherOperation, Trial
from determined.master.lifecycle import states
from determined.master.scheduling import pools, scheduler

PREEMPTING = pools.parse({"scheduler": {"type": "priority", "preemption": True}})


@pytest.fixture
def session(tmp_path: pathlib.Path) -> Iterator[Session]:
    engine = make_engine(default_db_url(tmp_path))
    upgrade(engine)
    with Session(engine, info={pools.POOLS_INFO: PREEMPTING}) as s:
        yield s
    engine.dispose()


def experiment(s: Session, exp_id: int, priority: int, slots_per_trial: int = 1) -> None:
    s.add(Experiment(id=exp_id, state=states.ACTIVE, model_def=b"",
                     config={"resources": {"priority": priority, "slots_per_trial": slots_per_trial},
                             "searcher": {"name": "random", "max_length": {"batches": 10}}}))
    s.flush()


def trial(s: Session, trial_id: int, exp_id: int, running: bool) -> Trial:
    t = Trial(id=trial_id, experiment_id=exp_id, request_id=f"r{trial_id}", hparams={}, seed=0, state=states.ACTIVE,
              allocation_id=f"alloc-{trial_id}" if running else None)
    s.add(t)
    s.flush()
    s.add(SearcherOperation(trial_id=trial_id, length=10, length_batches=10, completed=False))
    s.flush()
    return t


def ids(trials: List[Trial]) -> List[int]:
    return [t.id for t in trials]


def test_the_lowest_priority_newest_trials_are_preempted_just_enough(session: Session) -> None:
    experiment(session, 1, 60)
    experiment(session, 2, 80)
    experiment(session, 3, 42)
    for trial_id, exp_id in ((1, 1), (2, 1), (3, 2), (4, 2)):
        trial(session, trial_id, exp_id, running=True)  # 4 slots, all taken
    experiment(session, 4, 10, slots_per_trial=3)
    trial(session, 5, 4, running=False)  # needs 3
    assert ids(scheduler.preemption_victims(session, free_slots=0)) == [4, 3, 2]  # priority 80 newest first, then 60
    assert ids(scheduler.preemption_victims(session, free_slots=1)) == [4, 3]
    victims = scheduler.preempt_for_waiting_jobs(session, free_slots=1)
    assert all(t.preempt_requested for t in victims)
    assert scheduler.preemption_victims(session, free_slots=1) == [], "their slots are on their way: nobody else"
    # While the 3-slot job waits, the slots the victims free go to nobody of lower priority.
    trial(session, 6, 2, running=False)
    assert scheduler.pick_trials(session, free_slots=2) == []
    assert ids(scheduler.pick_trials(session, free_slots=3)) == [5]


def test_equal_or_higher_priority_is_never_preempted_nor_anything_when_it_cannot_make_room(session: Session) -> None:
    experiment(session, 1, 10)
    experiment(session, 2, 42)
    trial(session, 1, 1, running=True)
    trial(session, 2, 2, running=True)
    experiment(session, 3, 42, slots_per_trial=2)
    trial(session, 3, 3, running=False)
    assert scheduler.preemption_victims(session, free_slots=0) == []  # nothing runs at a priority below 42


def test_no_preemption_unless_the_pool_says_so(session: Session) -> None:
    session.info[pools.POOLS_INFO] = pools.parse({"scheduler": {"type": "priority"}})  # Determined's default
    experiment(session, 1, 60)
    trial(session, 1, 1, running=True)
    experiment(session, 2, 10)
    trial(session, 2, 2, running=False)
    assert scheduler.preemption_victims(session, free_slots=0) == []


def test_fair_shares_split_by_weight_and_hand_on_what_a_job_cannot_use() -> None:
    assert scheduler.fair_shares(4, {1: (1.0, 10), 2: (1.0, 10)}) == {1: 2.0, 2: 2.0}
    assert scheduler.fair_shares(4, {1: (3.0, 10), 2: (1.0, 10)}) == {1: 3.0, 2: 1.0}
    assert scheduler.fair_shares(4, {1: (1.0, 1), 2: (1.0, 10), 3: (1.0, 0)}) == {1: 1.0, 2: 3.0, 3: 0.0}


def test_fair_share_takes_a_trial_back_from_a_job_above_its_share_once(session: Session) -> None:
    session.info[pools.POOLS_INFO] = pools.parse({"scheduler": {"type": "fair_share"}})
    experiment(session, 1, 42)
    for trial_id in (1, 2):
        trial(session, trial_id, 1, running=True)  # alice holds both slots
    trial(session, 3, 1, running=False)
    assert scheduler.preemption_victims(session, free_slots=0, capacity=2) == []  # nobody else wants slots
    experiment(session, 2, 42)  # bob arrives: equal weights, one slot each
    trial(session, 4, 2, running=False)
    victims = scheduler.preempt_for_waiting_jobs(session, free_slots=0, capacity=2)
    assert ids(victims) == [2] and victims[0].preempt_requested  # alice's newest
    assert scheduler.preemption_victims(session, free_slots=0, capacity=2) == []  # its slot is on its way
    assert ids(scheduler.pick_trials(session, free_slots=1)) == [4]  # the freed slot goes to bob, not back to alice
    session.get(Trial, 2).allocation_id = None
    session.get(Trial, 4).allocation_id = "alloc-4"
    session.flush()
    assert scheduler.preemption_victims(session, free_slots=0, capacity=2) == []  # 1 and 1: balanced, stays so


def test_nothing_is_preempted_for_a_job_its_pool_s_usable_slots_cannot_hold(session: Session) -> None:
    """A disabled agent (`det agent disable --drain`: its trials finish there) or disabled slots leave the pool fewer
    usable slots (`capacity`): a pending job they cannot hold preempts nobody, since the freed slots would not be
    given to it; with the slots usable again it does."""
    experiment(session, 1, 60)
    trial(session, 1, 1, running=True)
    trial(session, 2, 1, running=True)
    experiment(session, 2, 10)
    trial(session, 3, 2, running=False)
    assert scheduler.preemption_victims(session, free_slots=0, capacity=0) == []  # the one agent drains
    assert ids(scheduler.preemption_victims(session, free_slots=0, capacity=1)) == [2]
    assert ids(scheduler.preemption_victims(session, free_slots=0, capacity=2)) == [2]
