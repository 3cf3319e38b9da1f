"""An engine's ``training.config`` keys, read from its config model: name, type, default and description
(``harness engines NAME`` prints them; the guide's tables come from here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str
    default: str
    description: str


def _type_name(annotation: Any) -> str:
    text = getattr(annotation, "__name__", None) if not getattr(annotation, "__args__", None) else None
    return text or str(annotation).replace("typing.", "")


def config_keys(model: type[BaseModel], prefix: str = "") -> list[ConfigKey]:
    """Every key of ``model``, nested sections as dotted names."""
    out = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out += config_keys(annotation, f"{prefix}{name}.")
            continue
        if field.default is not PydanticUndefined:
            default = repr(field.default)
        elif field.default_factory is not None:
            default = repr(field.default_factory())  # type: ignore[call-arg]
        else:
            default = "(required)"
        out.append(ConfigKey(f"{prefix}{name}", _type_name(annotation), default, field.description or ""))
    return out
