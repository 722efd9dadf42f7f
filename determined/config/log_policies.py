"""``log_policies``: regular expressions matched against a trial's log lines, and what a match does.

Two forms are read, as Determined read them:

* 0.38: a list of ``{name, pattern, action}``: ``name`` (required) labels the run when ``pattern`` matches one of
  its log lines; ``action`` is ``cancel_retries`` (the trial is not restarted after it fails), ``exclude_node``
  (its restarts avoid the node it ran on) or absent (a label only); ``pattern: null`` switches off the policy
  of that name (one of the defaults, say);
* 0.26.4 to 0.37: ``{pattern, action: {type: cancel_retries | exclude_node}}`` with no name.

The canonical form is a list of ``{"name", "pattern", "action"}`` (``action`` a string or None), the user's
policies first, then the default ones (``CUDA OOM`` and ``ECC Error``, labels only) whose name the user did not
give. The master applies them (determined/master/lifecycle/log_policies.py).
"""
import re
from typing import Any, Dict, List, Mapping

from determined.config.errors import Problems, join_path
from determined.config.fields import INVALID, Spec, unknown_key

ACTIONS = ("cancel_retries", "exclude_node")
DEFAULT_LOG_POLICIES: List[Dict[str, Any]] = [
    {"name": "CUDA OOM", "pattern": ".*CUDA out of memory.*", "action": None},
    {"name": "ECC Error", "pattern": ".*uncorrectable ECC error encountered.*", "action": None},
]
_FIELDS = ("name", "pattern", "action")
_EXAMPLE = "e.g. {name: oom, pattern: '.*out of memory.*', action: cancel_retries}"


class LogPolicies(Spec):
    allowed = f"a list of log policies {{name, pattern, action}}, {_EXAMPLE}"

    def check(self, value: Any, path: str, problems: Problems) -> Any:
        if not isinstance(value, (list, tuple)):
            problems.wrong_value(path, value, self.allowed)
            return INVALID
        out: List[Dict[str, Any]] = []
        names: Dict[str, int] = {}
        ok = True
        for i, item in enumerate(value):
            policy = self._policy(item, join_path(path, i), problems)
            if policy is INVALID:
                ok = False
                continue
            name = policy["name"]
            if name is not None:
                if name in names:
                    problems.add(join_path(join_path(path, i), "name"), f"{name!r} is also the name of policy {names[name]}",
                                 "give every log policy its own name")
                    ok = False
                    continue
                names[name] = i
            out.append(policy)
        if not ok:
            return INVALID
        given = {p["name"] for p in out if p["name"] is not None}
        out += [dict(p) for p in DEFAULT_LOG_POLICIES if p["name"] not in given]
        return out

    def _policy(self, item: Any, path: str, problems: Problems) -> Any:
        if not isinstance(item, Mapping):
            problems.wrong_value(path, item, f"a log policy {{name, pattern, action}}, {_EXAMPLE}")
            return INVALID
        for key in item:
            if key not in _FIELDS:
                unknown_key(problems, path, key, list(_FIELDS))
        name, pattern, action = item.get("name"), item.get("pattern"), item.get("action")
        ok = True
        if name is not None and (not isinstance(name, str) or not name):
            problems.wrong_value(join_path(path, "name"), name, "the policy's name, a non-empty string")
            ok = False
        if pattern is not None:
            if not isinstance(pattern, str):
                problems.wrong_value(join_path(path, "pattern"), pattern, "a regular expression (a string)")
                ok = False
            else:
                try:
                    re.compile(pattern)
                except re.error as e:
                    problems.add(join_path(path, "pattern"), f"{pattern!r} is not a valid regular expression ({e})",
                                 "fix the regular expression")
                    ok = False
        if isinstance(action, Mapping):  # the 0.26.4-0.37 form {type: ...}
            extra = [k for k in action if k != "type"]
            for key in extra:
                unknown_key(problems, join_path(path, "action"), key, ["type"])
            action = action.get("type")
            if extra:
                ok = False
        if action is not None and action not in ACTIONS:
            problems.wrong_value(join_path(path, "action"), action, "one of " + ", ".join(ACTIONS) + ", or no action (a label)")
            ok = False
        if name is None and (pattern is None or action is None):
            problems.add(path, "a policy without a name needs both pattern and action (the 0.26.4-0.37 form)",
                         f"give the policy a name (0.38 form), {_EXAMPLE}")
            ok = False
        if not ok:
            return INVALID
        return {"name": name, "pattern": pattern, "action": action}


def active_log_policies(config: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The policies of a canonical config that can match (those with a pattern); the defaults for a config
    stored before log policies existed."""
    policies = config.get("log_policies")
    if policies is None:
        policies = DEFAULT_LOG_POLICIES
    return [dict(p) for p in policies if isinstance(p, Mapping) and p.get("pattern")]
