"""Config templates (`det template`): named partial experiment configs stored on the master and merged under the
config of an experiment created with `--template NAME` (determined.config.overrides.merge_template)."""
from typing import Any, Dict, Mapping

from sqlalchemy import select
from sqlalchemy.orm import Session

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
    problems = names.experiment_config_problems(dict(value)) if "searcher" in value else []
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


def merge_under(s: Session, name: Any, raw: Any) -> Dict[str, Any]:
    """The experiment config `raw` (a mapping or its YAML text) merged over the template `name`."""
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
    return merge_template(raw, get(s, name).config)
