"""What a YAML (or JSON) config file hides from every loader, read from its node tree (which keeps every key, its line
and how each value was written) before the workflow checks what the config says:

- a key given twice in one mapping: the loader keeps the last one and silently drops the first;
- a plain (unquoted) value that YAML 1.1 reads as another type than it looks: `no`, `on`, `y` as booleans, `0x10`,
  `010`, `1_000` or `1:30` as integers or floats. `true`/`false` and decimal numbers are what they look like.

Snakemake loads the config files itself, so the workflow re-reads each one here.
"""
from __future__ import annotations

import re
from pathlib import Path

import yaml

_BOOL, _INT, _FLOAT = "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
_PLAIN = {_BOOL: re.compile(r"true|false"), _INT: re.compile(r"[-+]?(0|[1-9][0-9]*)"),
          _FLOAT: re.compile(r"[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?|[-+]?\.(inf|Inf|INF)|\.(nan|NaN|NAN)")}


def _walk(node: yaml.Node, where: str, seen_nodes: set[int]):
    """(dotted key, node) of every value node, at any depth; and ('key', mapping, key node) pairs for the keys."""
    if id(node) in seen_nodes:  # an alias of a node already walked
        return
    seen_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = f"{where}.{key.value}" if where else str(key.value)
            yield where, node, key
            yield from _walk(value, name, seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from _walk(item, f"{where}[{index}]", seen_nodes)
    else:
        yield where, None, node


def _duplicates(root: yaml.Node):
    """(dotted key, first line, repeated line) of every key given twice in the same mapping."""
    first: dict[tuple[int, str, str], int] = {}
    for where, mapping, key in _walk(root, "", set()):
        if mapping is None or not isinstance(key, yaml.ScalarNode):
            continue
        line, seen = key.start_mark.line + 1, (id(mapping), key.tag, key.value)
        if seen in first:
            yield (f"{where}.{key.value}" if where else key.value), first[seen], line
        else:
            first[seen] = line


def _implicit(root: yaml.Node):
    """(dotted key, line, text, value read) of every plain value YAML reads as a bool or number it does not look like."""
    for where, mapping, node in _walk(root, "", set()):
        if mapping is None and isinstance(node, yaml.ScalarNode) and node.style is None and node.tag in _PLAIN \
                and not _PLAIN[node.tag].fullmatch(node.value):
            value = yaml.safe_load(node.value)
            yield where, node.start_mark.line + 1, node.value, value


def config_yaml_errors(path: str | Path) -> list[str]:
    """One line per key given twice and per value YAML reads as another type, naming the file, the key, the line(s)
    and the fix. A file YAML cannot read is left to the loader that read it (Snakemake, which also reads JSON)."""
    try:
        root = yaml.compose(Path(path).read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return []
    if root is None:
        return []
    errors = [f"{path}: duplicate key {key!r} at " + (f"lines {first} and {again}" if first != again
                                                        else f"line {first} (twice)")
              + ": YAML keeps only the last one and silently drops the first; keep one (merge them if both are "
                "sections)"
              for key, first, again in _duplicates(root)]
    for key, line, text, value in _implicit(root):
        kind = "a boolean" if isinstance(value, bool) else "a number"
        plain = str(value).lower() if isinstance(value, bool) else repr(value)
        errors.append(f"{path}: {key} at line {line}: {text!r} is read by YAML as {kind}, {plain}; write {plain} if "
                      f"that is meant, or quote it (\"{text}\") for the text")
    return errors
