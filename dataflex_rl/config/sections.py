"""Settings dataclasses from config sections: the dataclass's defaults fill what a section leaves out."""
from __future__ import annotations

from dataclasses import fields
from typing import Any, Mapping, TypeVar

T = TypeVar("T")


def filled(cls: type[T], section: Mapping[str, Any] | None) -> T:
    """`cls` from a config section (None: all defaults); keys `cls` does not have are left to the schema checks."""
    known = {f.name for f in fields(cls)}
    return cls(**{key: value for key, value in (section or {}).items() if key in known})
