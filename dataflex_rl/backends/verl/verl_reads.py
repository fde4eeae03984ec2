"""Which override keys verl reads: a key verl's config declares but no code of it reads (0.9.1's
`actor_rollout_ref.actor.grad_clip`: its FSDP engine clips with `actor.optim.clip_grad`) would be accepted by Hydra and
by `validate_config` and then silently change nothing. The dry run refuses such a key through
dataflex_rl.backends.verl.verl_config.checked; tests/test_verl_config.py runs it on every shipped study.

A key counts as read when verl's installed Python source reads its last component: `x.name` (an attribute load),
`x["name"]`, `x.get("name")` / `x.pop("name")` or `getattr(x, "name")`. A `self.name` read counts only inside the class
(or a base of the class) the key's section is built into, its `_target_`, so an optimizer config reading its own
deprecated `grad_clip` is not a read of `actor.grad_clip`. Declarations are not reads: YAML files are not scanned, and
a dataclass field is an annotation, not a load. Generic names (`n`, `path`, `seed`) pass on their name alone.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path
from typing import Iterator, Sequence

from dataflex_rl.backends.verl.job import CONFIG_BLOCK

# Keys verl reads other than by their own name, each with the file (under verl's package), line and text that reads
# them; tests/test_verl_config.py checks each line against the installed verl.
INDIRECT = {
    # interpolated into rollout.response_length, which the rollout reads by name
    "data.max_response_length": ("trainer/config/rollout/rollout.yaml", 39, "${oc.select:data.max_response_length"),
    # the whole ray_init block is ray.init's keyword arguments
    "ray_kwargs.ray_init.num_cpus": ("trainer/main_ppo.py", 74, "ray.init(**OmegaConf.to_container(ray_init_kwargs))"),
    # the whole reward_kwargs block is passed to the reward function as keywords
    "reward.custom_reward_function.reward_kwargs.seed": ("trainer/ppo/reward.py", 82,
                                                         'reward_fn_config.get("reward_kwargs", {})'),
}


class _Reads(ast.NodeVisitor):
    """The reads of names in one file's syntax tree, by name, as (file, line, the enclosing class where the read is
    `self.name`, else None)."""

    def __init__(self, file: str):
        self.file, self.classes, self.reads = file, [], {}

    def _add(self, name, node, owner=None):
        self.reads.setdefault(name, []).append((self.file, node.lineno, owner))

    def visit_ClassDef(self, node):
        self.classes.append(node.name)
        self.generic_visit(node)
        self.classes.pop()

    def visit_Attribute(self, node):
        if isinstance(node.ctx, ast.Load):
            is_self = isinstance(node.value, ast.Name) and node.value.id == "self"
            self._add(node.attr, node, (self.classes[-1] if self.classes else None) if is_self else None)
        self.generic_visit(node)

    def visit_Subscript(self, node):
        if isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            self._add(node.slice.value, node)
        self.generic_visit(node)

    def visit_Call(self, node):
        function, args = node.func, node.args
        method = isinstance(function, ast.Attribute) and function.attr in ("get", "pop") and args
        builtin = isinstance(function, ast.Name) and function.id == "getattr" and len(args) > 1
        name = args[0] if method else args[1] if builtin else None
        if isinstance(name, ast.Constant) and isinstance(name.value, str):
            self._add(name.value, node)
        self.generic_visit(node)


@functools.lru_cache(maxsize=None)
def _sources(root: Path) -> dict[str, str]:
    """The text of every Python file under `root`, by its path relative to `root`, in order of path."""
    return {str(path.relative_to(root)): path.read_text() for path in sorted(Path(root).rglob("*.py"))}


_PARSED: dict[tuple[Path, str], dict[str, list[tuple[str, int, str | None]]]] = {}  # file_reads', per process


def file_reads(root: Path, file: str) -> dict[str, list[tuple[str, int, str | None]]]:
    """Every read of a name in `file` (a path under `root`), by name, as (file, line, the enclosing class where the
    read is `self.name`, else None); parsed once per process."""
    if (root, file) not in _PARSED:
        reads = _Reads(file)
        reads.visit(ast.parse(_sources(root)[file], str(root / file)))
        _PARSED[root, file] = reads.reads
    return _PARSED[root, file]


def _naming(root: Path, name: str) -> list[str]:
    """The Python files under `root` whose text contains `name`: the only ones that can read it, since a read spells
    its name (an attribute, or a string constant that no escape or implicit concatenation splits)."""
    return [file for file, text in _sources(root).items() if name in text]


def source_reads(root: Path, name: str) -> Iterator[tuple[str, int, str | None]]:
    """Every read of `name` in the Python source under `root` (`file_reads`), parsing only the files that name it,
    those parsed already first. Parsing all of verl takes seconds, and a generic name (`n`, `path`) is in nearly every
    file: a caller that stops at its first read that counts (`unread_keys`) mostly finds it in a file parsed already
    for a rarer name."""
    files = _naming(root, name)
    for file in sorted(files, key=lambda file: (root, file) not in _PARSED):
        yield from file_reads(root, file).get(name, ())


def _section_classes(cfg, key: str) -> set[str]:
    """The class names (with their bases) of the dataclass verl builds the section holding `key` into (its
    `_target_`), whose own `self.<leaf>` reads belong to that section."""
    from hydra.utils import get_class

    node = cfg
    for part in key.split(".")[:-1]:
        node = node.get(part) if node is not None else None
    target = node.get("_target_") if node is not None and hasattr(node, "get") else None
    return {cls.__name__ for cls in get_class(target).__mro__} if target else set()


def unread_keys(cfg, overrides: Sequence[str]) -> list[str]:
    """The keys of `overrides` (composed into `cfg`) that no code of the installed verl reads; our own block
    (CONFIG_BLOCK, read by the plugin's trainer) and the keys read indirectly (INDIRECT) excepted. The rarest last
    components are looked up first, so the files parsed for them answer the generic ones (`source_reads`)."""
    import verl

    root = Path(verl.__file__).parent
    keys = [key for key in (override.split("=", 1)[0].lstrip("+") for override in overrides)
            if key not in INDIRECT and not key.startswith(f"{CONFIG_BLOCK}.")]
    read = {key: _is_read(cfg, root, key) for key in sorted(keys, key=lambda key: len(_naming(root, _leaf(key))))}
    return [key for key in keys if not read[key]]


def _leaf(key: str) -> str:
    return key.rsplit(".", 1)[-1]


def _is_read(cfg, root: Path, key: str) -> bool:
    """Whether some code under `root` reads `key`'s last component, other than as `self.<leaf>` of a class its section
    is not built into."""
    owners = _section_classes(cfg, key)
    return any(owner is None or owner in owners for _, _, owner in source_reads(root, _leaf(key)))
