"""Config templates (`det template`): /templates (views/serialize.template)."""
from typing import Any, Dict, List

from pydantic import Field

from determined.master.api.schemas._base import StrictWire, Wire


class Template(Wire):
    """A config template, secrets of its config hidden."""

    name: str
    config: Dict[str, Any] = Field(description="a partial experiment config")
    owner: str


class TemplateAnswer(Wire):
    """One template: `{"template": {...}}`."""

    template: Template


class TemplateList(Wire):
    """Every template, by name."""

    templates: List[Template]


class CreateTemplateBody(StrictWire):
    """POST /templates: a new template."""

    name: Any = Field(None, description="the template's name (required)")
    config: Any = Field(None, description="a mapping of experiment config fields, or its YAML text (required)")


class SetTemplateBody(StrictWire):
    """PUT /templates/{name}: the config that replaces the template's."""

    config: Any = Field(None, description="a mapping of experiment config fields, or its YAML text (required)")
