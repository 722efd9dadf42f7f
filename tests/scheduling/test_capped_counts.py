"""The scheduler counts each experiment's waiting trials only up to what one call could start or share out (a search
may hold thousands): on random queues, with priorities, fair share, pools of their own, max_slots,
max_concurrent_trials, zero-slot trials and trials asked to close, the trials it picks and the trials it preempts
are the same as with every waiting trial counted (on SQLite, and on PostgreSQL under DET_TEST_DB=postgres)."""
import pathlib
import random
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
from sqlalchemy.orm import Session

from determined.master.db import engine as db_engine
from determined.master.db import make_engine, upgrade
from determined.master.db.models import Experiment, SearcherOperation, Trial
from determined.master.lifecycle import states
from determined.master.scheduling import pools, scheduler

PRIORITY = pools.parse({"scheduler": {"type": "priority", "preemption": True}})
FAIR_SHARE = pools.parse({"scheduler": {"type": "fair_share"}})
TWO_POOLS = pools.parse({"scheduler": {"type": "priority", "preemption": True}, "default_compute_resource_pool": "a"},
                        [{"pool_name": "a", "slots": [0, 1, 2, 3]},
                         {"pool_name": "b", "slots": [4, 5, 6, 7, 8, 9], "scheduler": {"type": "fair_share"}}])


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    # The data dir's database: SQLite, or PostgreSQL under DET_TEST_DB=postgres (tests/_postgres.py).
    engine = make_engine(db_engine.default_db_url(pathlib.Path(tmp_path_factory.mktemp("capped"))))
    upgrade(engine)
    yield engine
    engine.dispose()


def fill(s: Session, rng: random.Random, pool_names: Tuple[str, ...], capacity: Dict[str, int]) -> None:
    """Random experiments, each with running trials (within its pool's slots) and waiting ones."""
    used = {name: 0 for name in pool_names}
    trial_id = 0
    for exp_id in range(1, rng.randint(2, 7) + 1):
        pool = rng.choice(pool_names)
        resources: Dict[str, Any] = {"priority": rng.choice((10, 42, 42, 60)), "weight": rng.choice((1, 1, 2, 0.5)),
                                     "slots_per_trial": rng.choice((0, 1, 1, 1, 2, 3)), "resource_pool": pool}
        if rng.random() < 0.25:
            resources["max_slots"] = rng.randint(1, 6)
        searcher: Dict[str, Any] = {"name": "random", "max_length": {"batches": 10}}
        if rng.random() < 0.25:
            searcher["max_concurrent_trials"] = rng.randint(1, 5)
        s.add(Experiment(id=exp_id, state=states.ACTIVE, model_def=b"",
                         config={"resources": resources, "searcher": searcher}))
        s.flush()
        for _ in range(rng.choice((0, 1, 3, 12, 40))):
            trial_id += 1
            spt = resources["slots_per_trial"]
            running = rng.random() < 0.3 and used[pool] + spt <= capacity[pool]
            used[pool] += spt if running else 0
            s.add(Trial(id=trial_id, experiment_id=exp_id, request_id=f"r{trial_id}", hparams={}, seed=trial_id,
                        state=states.ACTIVE, allocation_id=f"alloc-{trial_id}" if running else None,
                        close_requested=rng.random() < 0.1, preempt_requested=running and rng.random() < 0.1))
            s.flush()
            if rng.random() < 0.8:  # the others wait for the search method (or only for their close)
                s.add(SearcherOperation(trial_id=trial_id, length=10, length_batches=10, completed=False))
        s.flush()


def decisions(s: Session, free: Any, zero_room: int, capacity: Any) -> Tuple[List[int], List[int]]:
    picked = [t.id for t in scheduler.pick_trials(s, free, zero_room)]
    victims = [t.id for t in scheduler.preemption_victims(s, free, capacity)]
    return picked, victims


@pytest.mark.parametrize("cluster_name", ["priority", "fair_share", "two_pools"])
def test_capped_counts_decide_as_full_counts(engine: Any, cluster_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = {"priority": PRIORITY, "fair_share": FAIR_SHARE, "two_pools": TWO_POOLS}[cluster_name]
    pool_names = ("a", "b") if cluster is TWO_POOLS else ("default",)
    capped = scheduler._demands

    def counting_all(s: Session, cap: int, experiments: Optional[Dict[int, Experiment]] = None) -> Any:
        return capped(s, 1_000_000, experiments)

    compared = 0
    # 38 and 81: queues where a fair share computed from too few waiting trials would preempt another trial.
    for seed in [*range(25), 38, 81]:
        rng = random.Random(seed)
        capacity = {"a": 4, "b": 6} if cluster is TWO_POOLS else {"default": rng.choice((2, 4, 8))}
        with engine.connect() as conn, Session(conn, info={pools.POOLS_INFO: cluster}) as s:
            fill(s, rng, pool_names, capacity)
            for _ in range(3):
                if cluster is TWO_POOLS:
                    free: Any = {name: rng.randint(0, n) for name, n in capacity.items()}
                    slots: Any = capacity
                else:
                    free, slots = rng.randint(0, capacity["default"]), capacity["default"]
                zero_room = rng.choice((0, 0, 2))
                got = decisions(s, free, zero_room, slots)
                monkeypatch.setattr(scheduler, "_demands", counting_all)
                try:
                    want = decisions(s, free, zero_room, slots)
                finally:
                    monkeypatch.setattr(scheduler, "_demands", capped)
                assert got == want, f"seed {seed}, free {free}, zero-slot room {zero_room}"
                compared += bool(want[0] or want[1])
            s.rollback()
    assert compared >= 20, "the random queues must make the scheduler pick or preempt in most cases"
