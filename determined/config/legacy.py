"""Upgrade a 0.12-style config (steps) to 0.13 names and lengths, before the config is checked.

``batches_per_step`` -> ``scheduling_unit`` (value unchanged, default 100); ``searcher.max_steps`` and
``searcher.target_trial_steps`` -> ``max_length: {batches: steps * batches_per_step}``; ``step_budget`` -> ``budget``;
``steps_per_round`` -> ``length_per_round``; integer ``min_validation_period`` / ``min_checkpoint_period`` (steps) ->
``{batches: n * batches_per_step}``. Giving an old and a new name for the same field is an error.
"""
from typing import Any, Dict, Mapping, Optional

from determined.config.errors import Problems, describe
from determined.config.fields import is_int
from determined.config.searchers import METHOD_FIELDS

DEFAULT_BATCHES_PER_STEP = 100
SEARCHER_RENAMES = (
    ("max_steps", "max_length"),
    ("target_trial_steps", "max_length"),
    ("step_budget", "budget"),
    ("steps_per_round", "length_per_round"),
)
PERIOD_FIELDS = ("min_validation_period", "min_checkpoint_period")


def _both(problems: Problems, old_path: str, new_name: str, old_name: str) -> None:
    problems.add(
        old_path,
        f"both {old_name} (0.12 name) and {new_name} (0.13 name) are given for the same field",
        f"keep only {new_name}",
    )


def _batches_per_step(raw: Mapping[str, Any], problems: Problems) -> Optional[int]:
    if raw.get("batches_per_step") is None:
        unit = raw.get("scheduling_unit")
        return int(unit) if is_int(unit) and unit >= 1 else DEFAULT_BATCHES_PER_STEP
    value = raw["batches_per_step"]
    if raw.get("scheduling_unit") is not None:
        _both(problems, "batches_per_step", "scheduling_unit", "batches_per_step")
        return None
    if not is_int(value) or value < 1:
        problems.wrong_value("batches_per_step", value, "a positive int (it is renamed scheduling_unit in 0.13)")
        problems.mark_handled("scheduling_unit")
        return None
    return int(value)


def _steps_to_length(
    value: Any, bps: Optional[int], path: str, new_path: str, problems: Problems, minimum: int
) -> Optional[Dict[str, int]]:
    if bps is None:
        problems.mark_handled(new_path)
        return None
    if not is_int(value) or value < minimum:
        bound = "a positive int" if minimum else "an int >= 0"
        problems.add(path, f"got {describe(value)}", f"a number of steps ({bound}), or use the 0.13 form {{batches: N}}")
        problems.mark_handled(new_path)
        return None
    return {"batches": int(value) * bps}


def upgrade_legacy_config(raw: Mapping[str, Any], problems: Problems) -> Dict[str, Any]:
    """A copy of ``raw`` with 0.12 names and step counts rewritten to 0.13; problems go to ``problems``."""
    out = dict(raw)
    bps = _batches_per_step(raw, problems)
    if "batches_per_step" in out:
        value = out.pop("batches_per_step")
        if bps is not None and value is not None:
            out["scheduling_unit"] = bps
    for name in PERIOD_FIELDS:
        value = out.get(name)
        if value is not None and (is_int(value) or isinstance(value, (float, str))):
            converted = _steps_to_length(value, bps, name, name, problems, minimum=0)
            if converted is None:
                out.pop(name)
            else:
                out[name] = converted
    searcher = out.get("searcher")
    if isinstance(searcher, Mapping):
        out["searcher"] = _upgrade_searcher(searcher, bps, problems)
    return out


def _upgrade_searcher(searcher: Mapping[str, Any], bps: Optional[int], problems: Problems) -> Dict[str, Any]:
    out = dict(searcher)
    allowed = METHOD_FIELDS.get(searcher.get("name"))  # type: ignore[arg-type]
    renamed_from: Dict[str, str] = {}
    for old, new in SEARCHER_RENAMES:
        if old not in out:
            continue
        old_path, new_path = f"searcher.{old}", f"searcher.{new}"
        if allowed is not None and new not in allowed:
            continue  # reported as an unknown field of this searcher
        if new in renamed_from:
            problems.add(old_path, f"both {renamed_from[new]} and {old} are given", f"keep only one (0.13: {new})")
            out.pop(old)
            continue
        if new in out:
            _both(problems, old_path, new, old)
            out.pop(old)
            continue
        renamed_from[new] = old
        converted = _steps_to_length(out.pop(old), bps, old_path, new_path, problems, minimum=1)
        if converted is not None:
            out[new] = converted
    return out
