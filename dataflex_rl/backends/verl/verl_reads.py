"""Which override keys verl reads: a key verl's config declares but no code of it reads (0.9.1's
`actor_rollout_ref.actor.grad_clip`: its FSDP engine clips with `actor.optim.clip_grad`) would be accepted by Hydra and
by `validate_config` and then silently change nothing. The dry run refuses such a key through
dataflex_rl.backends.verl.verl_config.refusal; tests/test_verl_config.py runs it on every shipped study.

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
from typing import Sequence

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


@functools.lru_cache(maxsize=None)
def source_reads(root: Path) -> dict[str, list[tuple[str, int, str | None]]]:
    """Every read of a name in the Python source under `root`, by name, as (file, line, the enclosing class where
    the read is `self.name`, else None). Parsed once per process (a few seconds for verl)."""
    reads: dict[str, list] = {}

    class Reads(ast.NodeVisitor):
        def __init__(self, file):
            self.file, self.classes = file, []

        def _add(self, name, node, owner=None):
            reads.setdefault(name, []).append((self.file, node.lineno, owner))

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

    for path in sorted(Path(root).rglob("*.py")):
        Reads(str(path.relative_to(root))).visit(ast.parse(path.read_text(), str(path)))
    return reads


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
    (CONFIG_BLOCK, read by the plugin's trainer) and the keys read indirectly (INDIRECT) excepted."""
    import verl

    reads = source_reads(Path(verl.__file__).parent)
    unread = []
    for override in overrides:
        key = override.split("=", 1)[0].lstrip("+")
        if key in INDIRECT or key.startswith(f"{CONFIG_BLOCK}."):
            continue
        owners = _section_classes(cfg, key)
        if not any(owner is None or owner in owners for _, _, owner in reads.get(key.rsplit(".", 1)[-1], [])):
            unread.append(key)
    return unread
