"""Settings dataclasses from config sections: the dataclass's defaults fill what a section leaves out."""
from __future__ import annotations

from dataclasses import fields
from typing import Any, Mapping, TypeVar, get_args, get_type_hints

T = TypeVar("T")


def as_float(value: Any) -> Any:
    """An integer given for a float setting, as that float; anything else as it is. YAML reads `1` as an int and `1.0`
    as a float, and a job's slice records its values' reprs, so without this `learning_rate: 1` and `1.0` would be two
    settings and the one would retrain what the other built."""
    return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


def filled(cls: type[T], section: Mapping[str, Any] | None) -> T:
    """`cls` from a config section (None: all defaults), an integer given for a float field as that float (as_float);
    keys `cls` does not have are left to the schema checks."""
    hints = get_type_hints(cls)
    floats = {f.name for f in fields(cls) if float in {hints[f.name], *get_args(hints[f.name])}
              and int not in get_args(hints[f.name])}
    return cls(**{key: as_float(value) if key in floats else value
                  for key, value in (section or {}).items() if key in {f.name for f in fields(cls)}})
