"""Duplicate keys in a YAML (or JSON) config file, which every loader resolves silently: the last one wins.

Snakemake loads the config files itself, so the workflow re-reads each one here, as a node tree that keeps every key
and its line, before checking what they say.
"""
from __future__ import annotations

from pathlib import Path

import yaml


def _duplicates(node: yaml.Node, where: str, seen_nodes: set[int]):
    """(dotted key, first line, repeated line) of every key given twice in the same mapping, at any depth."""
    if id(node) in seen_nodes:  # an alias of a node already walked
        return
    seen_nodes.add(id(node))
    if isinstance(node, yaml.MappingNode):
        first: dict[tuple[str, str], int] = {}
        for key, value in node.value:
            name = f"{where}.{key.value}" if where else str(key.value)
            if isinstance(key, yaml.ScalarNode):
                line = key.start_mark.line + 1
                if (key.tag, key.value) in first:
                    yield name, first[(key.tag, key.value)], line
                else:
                    first[(key.tag, key.value)] = line
            yield from _duplicates(value, name, seen_nodes)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            yield from _duplicates(item, f"{where}[{index}]", seen_nodes)


def duplicate_key_errors(path: str | Path) -> list[str]:
    """One line per key given twice in the same mapping of the config file at `path`, naming the file, the key and
    both lines. A file YAML cannot read is left to the loader that read it (Snakemake, which also reads JSON)."""
    try:
        root = yaml.compose(Path(path).read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return []
    if root is None:
        return []
    return [f"{path}: duplicate key {key!r} at " + (f"lines {first} and {again}" if first != again else f"line {first} "
                                                       f"(twice)")
            + ": YAML keeps only the last one and silently drops the first; keep one (merge them if both are sections)"
            for key, first, again in _duplicates(root, "", set())]
