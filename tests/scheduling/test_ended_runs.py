"""A run that ended but whose end the master has not recorded yet holds no slot for the scheduler: when bob's trial
ends and a slot frees, the next trial of the same priority is bob's (the fewest slots for his weight), not the
earlier submitter's because bob's ended trial still looked as if it ran (the 2:1 split fair_share.py measured)."""
import pathlib
from typing import Iterator, Set

import pytest
from sqlalchemy.orm import Session

from determined.master.db import default_db_url, make_engine, upgrade
from determined.master.scheduling import pools, scheduler

from .test_preemption_choice import experiment, trial

ENDED: Set[int] = set()


@pytest.fixture
def session(tmp_path: pathlib.Path) -> Iterator[Session]:
    engine = make_engine(default_db_url(tmp_path))
    upgrade(engine)
    ENDED.clear()
    with Session(engine, info={pools.POOLS_INFO: pools.DEFAULT, scheduler.ENDED_RUNS_INFO: lambda: set(ENDED)}) as s:
        yield s
    engine.dispose()


def test_an_ended_but_unrecorded_run_does_not_count_as_holding_its_slot(session: Session) -> None:
    experiment(session, 1, 42)  # alice, submitted first
    experiment(session, 2, 42)  # bob
    trial(session, 1, 1, running=True)
    trial(session, 2, 2, running=True)  # bob's run: it has just ended, its end not recorded yet
    trial(session, 3, 1, running=False)
    trial(session, 4, 2, running=False)
    assert [t.id for t in scheduler.pick_trials(session, 1)] == [3], "both hold a slot: the tie goes to alice"
    ENDED.add(2)
    assert [t.id for t in scheduler.pick_trials(session, 1)] == [4], "bob holds none now: his next trial starts"
