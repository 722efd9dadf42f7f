"""The read routes that a data dir can answer by itself: one table, served two ways.

The master's app serves each entry as a GET route (determined/master/api/read_routes.py builds the route, its typed
parameters and its answer model from the entry); with no master running, the CLI's local reads
(local_reads.py) match a request against the same entries and call the same reader. So a path, a parameter,
its bounds and the answer are written once. This module imports no web framework: `det experiment list` loads it.
"""
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from determined.master.problems import RequestProblem
from determined.master.views import reads, workspace_reads


class Param:
    """A query parameter: `kind` "int", "str" or "strs" (repeatable), its default, whether it is required, bounds.
    (Plain classes, not dataclasses: this module is on the CLI's start-up path.)"""

    __slots__ = ("name", "kind", "default", "required", "ge", "le", "max_length")

    def __init__(self, name: str, kind: str = "str", default: Any = None, required: bool = False,
                 ge: Optional[int] = None, le: Optional[int] = None, max_length: Optional[int] = None) -> None:
        self.name, self.kind, self.default, self.required = name, kind, default, required
        self.ge, self.le, self.max_length = ge, le, max_length


class Read:
    """One read route: `path` under /api/v1 (path parameters named as the reader's arguments, those in `ints`
    whole numbers), the reader called as `read(db, **path, **query)`, whether it answers a `reads.Listing`, its
    answer model (`module.Name` under determined/master/api/schemas), the name of its operation, what a
    render error names (formatted with the path and query parameters), and the route's description."""

    __slots__ = ("path", "read", "answer", "name", "what", "listing", "ints", "query", "doc", "segments")

    def __init__(self, path: str, read: Callable[..., Any], answer: str, name: str, what: str = "",
                 listing: bool = False, ints: Tuple[str, ...] = (), query: Tuple[Param, ...] = (),
                 doc: str = "") -> None:
        self.path, self.read, self.answer, self.name, self.what = path, read, answer, name, what
        self.listing, self.ints, self.query, self.doc = listing, ints, query, doc
        # each segment of the path: a literal, or the name of a parameter ("{name}")
        self.segments = tuple(path.strip("/").split("/"))

    @property
    def path_params(self) -> List[str]:
        return [s[1:-1] for s in self.segments if s.startswith("{")]

    def match(self, parts: List[str]) -> Optional[Dict[str, Any]]:
        """The path parameters when the path's `parts` (split at "/") are this route's, else None."""
        if len(parts) != len(self.segments):
            return None
        args: Dict[str, Any] = {}
        for template, part in zip(self.segments, parts):
            if template.startswith("{"):
                name = template[1:-1]
                if not part:
                    return None
                if name in self.ints:
                    if not (part.isascii() and part.isdigit()):
                        return None
                    args[name] = int(part)
                else:
                    args[name] = part
            elif template != part:
                return None
        return args


def _checked(route: Read, raw: Mapping[str, Any]) -> Dict[str, Any]:
    """The query parameters of a request made outside the app (local reads), checked as the app checks them."""
    args: Dict[str, Any] = {}
    problems: List[str] = []
    for p in route.query:
        value = raw.get(p.name)
        if p.kind == "strs":
            if value is not None:
                args[p.name] = [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]
            continue
        if isinstance(value, (list, tuple)):
            value = value[0] if value else None
        if value is None:
            if p.required:
                problems.append(f"{p.name}: required")
            elif p.default is not None:
                args[p.name] = p.default
            continue
        if p.kind == "int":
            try:
                value = int(value)
            except (TypeError, ValueError):
                problems.append(f"{p.name}: Input should be a valid integer, unable to parse string as an integer")
                continue
            if p.ge is not None and value < p.ge:
                problems.append(f"{p.name}: Input should be greater than or equal to {p.ge}")
            if p.le is not None and value > p.le:
                problems.append(f"{p.name}: Input should be less than or equal to {p.le}")
        else:
            value = str(value)
            if p.max_length is not None and len(value) > p.max_length:
                problems.append(f"{p.name}: String should have at most {p.max_length} characters")
        args[p.name] = value
    if problems:
        raise RequestProblem(400, f"invalid request to GET /api/v1{route.path}", problems)
    return args


def match(path: str) -> Optional[Tuple[Read, Dict[str, Any]]]:
    """The entry answering GET `path` (under /api/v1) and its path parameters, or None."""
    parts = path.strip("/").split("/")
    for route in READS:
        found = route.match(parts)
        if found is not None:
            return route, found
    return None


def answer(db: Any, route: Read, path_args: Mapping[str, Any], query: Mapping[str, Any]) -> Any:
    """The entry's answer as JSON-ready data, for a request made outside the app (query not yet checked)."""
    result = route.read(db, **path_args, **_checked(route, query))
    return result.answer() if isinstance(result, reads.Listing) else result


_STATES = Param("states", "strs")

READS: Tuple[Read, ...] = (
    Read("/experiments", reads.experiments, "experiments.ExperimentList", "list_experiments", listing=True,
         doc="`{\"experiments\": [...]}`; an experiment that cannot be shown is left out and named in `omitted`."),
    Read("/experiments/{experiment_id}", reads.experiment, "experiments.ExperimentDetail", "describe_experiment",
         "experiment {experiment_id}", ints=("experiment_id",), doc="An experiment with its trials."),
    Read("/experiments/{experiment_id}/checkpoints", reads.experiment_checkpoints, "checkpoints.CheckpointList",
         "experiment_checkpoints", listing=True, ints=("experiment_id",), query=(_STATES,),
         doc="The experiment's checkpoints, best first by its searcher metric; `states` filters."),
    Read("/trials/{trial_id}", reads.trial, "trials.TrialDetail", "describe_trial", "trial {trial_id}",
         ints=("trial_id",), doc="A trial with its workloads (validations, checkpoints) and status."),
    Read("/trials/{trial_id}/metrics", reads.trial_metrics, "trials.TrialMetrics", "trial_metrics",
         "trial {trial_id}'s {group} metrics", ints=("trial_id",),
         query=(Param("group", required=True, max_length=128), Param("max_points", max_length=32)),
         doc="One metric group of a trial (training, validation, or a custom group), downsampled to `max_points`."),
    Read("/trials/{trial_id}/logs", reads.trial_logs, "trials.TrialLogs", "trial_logs", "trial {trial_id}'s logs",
         ints=("trial_id",), query=(Param("offset", "int", 0, ge=0), Param("limit", "int", 1000, ge=1, le=10000)),
         doc="A page of a trial's log lines from `offset`."),
    Read("/trials/{trial_id}/checkpoints", reads.trial_checkpoints, "checkpoints.CheckpointList",
         "trial_checkpoints", listing=True, ints=("trial_id",), query=(_STATES,),
         doc="The trial's checkpoints; `states` filters."),
    Read("/checkpoints/{uuid}", reads.checkpoint, "checkpoints.CheckpointAnswer", "get_checkpoint",
         "checkpoint {uuid}", doc="A checkpoint by its uuid."),
    Read("/models", reads.models, "registry.ModelList", "list_models", listing=True,
         query=(Param("sort_by", default="name"), Param("order_by", default="asc"), Param("name", default=""),
                Param("description", default="")),
         doc="Registered models, sorted and filtered by name or description."),
    Read("/models/{name}", reads.model, "registry.ModelAnswer", "get_model", "model {name!r}",
         doc="A registered model."),
    Read("/workspaces", workspace_reads.workspaces, "workspaces.WorkspaceList", "list_workspaces", listing=True,
         query=(Param("name", default=""), Param("archived")), doc="Workspaces, filtered by name or archive state."),
    Read("/workspaces/{workspace_id}", workspace_reads.workspace, "workspaces.WorkspaceAnswer", "get_workspace",
         "workspace {workspace_id}", ints=("workspace_id",), doc="A workspace."),
    Read("/workspaces/{workspace_id}/projects", workspace_reads.projects, "workspaces.ProjectList", "list_projects",
         listing=True, ints=("workspace_id",), query=(Param("name", default=""), Param("archived")),
         doc="A workspace's projects, filtered by name or archive state."),
    Read("/projects", workspace_reads.projects, "workspaces.ProjectList", "all_projects", listing=True,
         doc="Every project."),
    Read("/projects/{project_id}", workspace_reads.project, "workspaces.ProjectAnswer", "get_project",
         "project {project_id}", ints=("project_id",), doc="A project."),
    Read("/projects/{project_id}/experiments", workspace_reads.project_experiments, "experiments.ExperimentList",
         "project_experiments", listing=True, ints=("project_id",), doc="A project's experiments."),
    Read("/templates", reads.templates, "templates.TemplateList", "list_templates", "templates",
         doc="The stored config templates."),
    Read("/templates/{name}", reads.template, "templates.TemplateAnswer", "get_template", "template {name!r}",
         doc="A config template."),
)
