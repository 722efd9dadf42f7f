"""Config templates (`det template`): named partial experiment configs stored on the master and merged under the
config of an experiment created with `--template NAME` (determined.config.overrides.merge_template).

Every user reads every template with its secrets hidden, as an experiment's config; so a template is applied only
for a user who may read all of it: its owner, an admin, or anyone when it holds no secret (nothing that answers
show as ********). Another user's template that holds secrets is refused with a 403 naming it and its secrets'
fields: applying it would hand its storage keys and `data.secrets` to the caller's trials.
"""
from typing import Any, Dict, List, Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

from determined.config import redaction
from determined.master.security import auth
from determined.master.registry import names
from determined.master.registry.fields import _json_type, check_body, check_metadata_size
from determined.master.views import reads, serialize
from determined.master.db import ConfigTemplate, utcnow
from determined.master.views.dbread import reader_of
from determined.master.problems import RequestProblem


def _check_config(value: Any) -> Dict[str, Any]:
    if isinstance(value, str):  # YAML text, as `det template create NAME FILE` sends it
        from determined.config import InvalidExperimentConfig, load_config_text

        try:
            value = load_config_text(value, "template", "invalid template config")
        except InvalidExperimentConfig as e:
            raise RequestProblem(400, e.header, list(e.problems)) from None
    if not isinstance(value, Mapping):
        raise RequestProblem(400, "invalid template", [
            f"config: expected a mapping of experiment config fields, got {_json_type(value)}"])
    problems = names.experiment_config_problems(dict(value))  # a name, labels: as an experiment's
    check_metadata_size(value, "config")
    if problems:
        raise RequestProblem(400, "invalid template", problems)
    return dict(value)


def get(s: Session, name: str) -> ConfigTemplate:
    row = s.scalars(select(ConfigTemplate).where(ConfigTemplate.name == name)).first()
    if row is None:
        reads.template(reader_of(s), name)  # raises the 404 that names the templates there are
    return row  # type: ignore[return-value]


def create(s: Session, body: Any, principal: auth.Principal) -> ConfigTemplate:
    fields = check_body(body, ("name", "config"), "template")
    name = names.check_name(fields.get("name"), "name", "template name")
    config = _check_config(fields.get("config"))
    if s.scalars(select(ConfigTemplate.id).where(ConfigTemplate.name == name)).first() is not None:
        raise RequestProblem(409, f"template {name!r} already exists; choose another name, or change it with "
                                  f"`det template set-value config {name} FILE`")
    now = utcnow()
    row = ConfigTemplate(name=name, config=config, owner=principal.username, owner_id=principal.user_id,
                         creation_time=now, last_updated_time=now)
    s.add(row)
    s.flush()
    return row


def set_config(s: Session, name: str, body: Any, principal: auth.Principal) -> ConfigTemplate:
    fields = check_body(body, ("config",), "template update")
    row = get(s, name)
    auth.check_owner(principal, row.owner, f"template {name!r}", "change", "templates")
    row.config = _check_config(fields.get("config"))
    row.last_updated_time = utcnow()
    return row


def remove(s: Session, name: str, principal: auth.Principal) -> None:
    row = get(s, name)
    auth.check_owner(principal, row.owner, f"template {name!r}", "delete", "templates")
    s.delete(row)


def to_json(row: ConfigTemplate) -> Dict[str, Any]:
    return serialize.template(row)


def hidden_fields(config: Any, redacted: Any, path: str = "") -> List[str]:
    """The dotted paths where `redacted` (redaction.experiment_config of `config`) hides a value."""
    if isinstance(config, Mapping) and isinstance(redacted, Mapping):
        out: List[str] = []
        for key, value in config.items():
            out += hidden_fields(value, redacted.get(key), f"{path}.{key}" if path else str(key))
        return out
    if isinstance(config, list) and isinstance(redacted, list) and len(config) == len(redacted):
        return [p for i, (a, b) in enumerate(zip(config, redacted)) for p in hidden_fields(a, b, f"{path}[{i}]")]
    return [] if config == redacted else [path]


def check_usable(row: ConfigTemplate, principal: auth.Principal) -> None:
    """Refuse (403) applying another user's template that holds secrets (see the module's doc)."""
    if principal.admin or (row.owner and principal.username == row.owner):
        return
    hidden = hidden_fields(row.config, redaction.experiment_config(row.config))
    if not hidden:
        return
    shown = ", ".join(hidden[:5]) + (f" and {len(hidden) - 5} more" if len(hidden) > 5 else "")
    raise RequestProblem(403, f"template {row.name!r} is owned by {row.owner or 'an admin'!r} and holds secrets "
                              f"({shown}); only its owner or an admin may create experiments with it (you are "
                              f"{principal.username!r}); ask its owner for a template without the secrets and put "
                              "your own in your config")


def merge_under(s: Session, name: Any, raw: Any, principal: auth.Principal) -> Dict[str, Any]:
    """The experiment config `raw` (a mapping or its YAML text) merged over the template `name`, which `principal`
    must be allowed to apply (check_usable)."""
    from determined.config import InvalidExperimentConfig, load_config_text
    from determined.config.overrides import merge_template

    if not isinstance(name, str) or not name:
        raise RequestProblem(400, "invalid experiment", ["template: expected the name of a template"])
    try:
        if isinstance(raw, str):
            raw = load_config_text(raw, "config")
    except InvalidExperimentConfig as e:
        raise RequestProblem(400, e.header, list(e.problems)) from None
    if not isinstance(raw, Mapping):
        raise RequestProblem(400, "invalid experiment", ["config: expected a mapping"])
    row = get(s, name)
    check_usable(row, principal)
    return merge_template(raw, row.config)
