"""Issue 33, finding 4: one searcher setting must not stop the master answering.

`adaptive_asha` with `divisor: 1.0000001`, `max_trials: 9000` and a length of 10^9 made `floor_log` run ~2*10^8
exact fraction multiplications (of ever longer fractions) before `max_rungs` applied; the master and
`det preview-search` share the function. Now the work is bounded by the rungs that can matter, a search that
would have more rungs than MAX_RUNGS is refused at submission, and normal settings give what they gave.
"""
from typing import Any, Dict

from determined import searcher
from determined.config.searchers import MAX_RUNGS
from determined.searcher._halving import effective_max_rungs, floor_log

from tests.auth._helpers import InProcessMaster
from tests.master._helpers import config, model_def

_PROBE = {"name": "adaptive_asha", "metric": "loss", "divisor": 1.0000001, "max_trials": 9000,
          "max_length": {"batches": 10**9}}


def _submit(master: InProcessMaster, searcher_section: Dict[str, Any]) -> Any:
    body = {"config": config(searcher=searcher_section), "model_definition": model_def(), "activate": False}
    token = master.session("determined").token
    return master.client().post("/api/v1/experiments", json=body, headers={"Authorization": f"Bearer {token}"})


def test_probe_divisor_close_to_one_is_answered_at_once(master: InProcessMaster) -> None:
    """The probe's config (max_rungs 5, the default) is a valid search of 5 rungs, as in Determined: submitted,
    previewed, and its rung lengths are those of the formula."""
    assert effective_max_rungs(5, 10**9, 9000, 1.0000001) == 5
    assert floor_log(10**9, 1.0000001, limit=6) == 6
    preview = searcher.preview({"searcher": {**_PROBE, "max_rungs": 5, "mode": "standard", "max_concurrent_trials": 0,
                                             "smaller_is_better": True, "bracket_rungs": None, "stop_once": False},
                                "hyperparameters": {"x": 1}})
    assert [b["rungs"] for b in preview["brackets"]] == [5, 4, 3]
    answer = _submit(master, _PROBE)
    assert answer.status_code == 200, answer.text


def test_too_many_rungs_are_refused_naming_the_fields(master: InProcessMaster) -> None:
    """max_rungs 10^9 with that divisor would make ~9*10^7 rungs per bracket: refused with a 400 that names
    max_rungs, the divisor and the bound; so are num_rungs and bracket_rungs past it."""
    answer = _submit(master, {**_PROBE, "max_rungs": 10**9})
    assert answer.status_code == 400, answer.text
    text = answer.text
    assert "max_rungs" in text and "1.0000001" in text and str(MAX_RUNGS) in text
    answer = _submit(master, {**_PROBE, "bracket_rungs": [10**9]})
    assert answer.status_code == 400 and "bracket_rungs" in answer.text, answer.text
    answer = _submit(master, {"name": "async_halving", "metric": "loss", "num_rungs": 10**9, "max_trials": 4,
                              "max_length": {"batches": 64}})
    assert answer.status_code == 400 and "num_rungs" in answer.text, answer.text


def test_floor_log_stays_exact_for_normal_divisors() -> None:
    """Exact powers and their neighbours, where a float log rounds wrongly, for int and float divisors."""
    for divisor, power in ((4, 64), (10, 1000), (3, 3**20), (2, 2**62), (2.5, 6), (1.5, 7)):
        exact = 0
        while divisor ** (exact + 1) <= power:
            exact += 1
        assert floor_log(power, divisor) == exact, (power, divisor)
    assert floor_log(3**20 - 1, 3) == 19 and floor_log(10**15, 10) == 15 and floor_log(10**15 - 1, 10) == 14
    assert floor_log(1, 1.0000001) == 0 and floor_log(2, 1.0000001, limit=3) == 3
