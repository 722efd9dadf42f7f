"""Config templates: partial experiment configs stored on the master under a name, merged under an experiment's
config (`create_experiment(..., template=NAME)`, `det experiment create --template NAME`). Determined 0.38's SDK
had no template class; `Template` and the `Determined` methods here are what `det template` works through.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

from determined.experimental.client._common import Connection


class Template:
    """A config template: `name`, `config` (the partial experiment config, secrets hidden) and `owner`."""

    def __init__(self, name: str, config: Dict[str, Any], owner: str) -> None:
        self.name = name
        self.config = config
        self.owner = owner
        self._json: Optional[Dict[str, Any]] = None

    def __repr__(self) -> str:
        return f"Template(name={self.name!r}, owner={self.owner!r})"

    @classmethod
    def _from_json(cls, data: Dict[str, Any]) -> "Template":
        template = cls(data["name"], data["config"], data["owner"])
        template._json = dict(data)
        return template

    def to_json(self) -> Dict[str, Any]:
        """The master's record of the template: name, config, owner."""
        return dict(self._json) if self._json is not None else {"name": self.name, "config": self.config,
                                                                 "owner": self.owner}


class TemplateMethods:
    """The template functions of `Determined` (a base class of it): `self._session` is its master's session."""

    _session: Any

    def list_templates(self) -> List[Template]:
        """Every template, by name."""
        return [Template._from_json(t) for t in self._session.get("/templates")["templates"]]

    def get_template(self, name: str) -> Template:
        """The template `name` (a NotFoundError if there is none)."""
        return Template._from_json(self._session.get(f"/templates/{name}")["template"])

    def create_template(self, name: str, config: Union[str, Dict[str, Any]]) -> Template:
        """Store a new template `name` with `config` (a dict of config fields, or its YAML text)."""
        return Template._from_json(self._session.post("/templates", {"name": name, "config": config})["template"])

    def set_template(self, name: str, config: Union[str, Dict[str, Any]]) -> Template:
        """Replace the config of the template `name`."""
        answer = self._session.request("PUT", f"/templates/{name}", json={"config": config})
        return Template._from_json(answer["template"])

    def delete_template(self, name: str) -> None:
        """Remove the template `name` (experiments created from it keep their merged configs)."""
        self._session.delete(f"/templates/{name}")


class Templates(TemplateMethods):
    """The template functions on a connection of their own (what the CLI uses; `Determined` has the same methods)."""

    def __init__(self, connection: Any) -> None:
        self._connection = connection if isinstance(connection, Connection) else Connection(session=connection)

    @property
    def _session(self) -> Any:  # type: ignore[override]
        return self._connection.session
