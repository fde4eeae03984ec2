"""The packages of dataflex_rl import each other in one direction, and so do the modules inside a package: no import
cycle between packages nor between modules, read from the source (every `dataflex_rl.<package>` import counts,
including the lazy ones inside functions; not those under `if TYPE_CHECKING:`, which never run: an annotation may name
a type of a module that imports this one).

`python tests/test_package_layers.py` prints the package-level and module-level cycles.
"""
import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "dataflex_rl"


def _unit(path: Path) -> str:
    """The package-level unit of a source file: its top-level package (`corpus`) or top-level module."""
    return path.relative_to(PACKAGE).with_suffix("").parts[0]


def _imported_modules(path: Path, root: Path = PACKAGE) -> list[str]:
    """Dotted names of the dataflex_rl modules `path` (a file under `root`) imports, relative imports resolved."""
    package = ["dataflex_rl", *path.relative_to(root).parent.parts]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for_annotations = {id(inner) for node in ast.walk(tree) if isinstance(node, ast.If) and _type_checking(node.test)
                       for inner in ast.walk(node)}
    names = []
    for node in ast.walk(tree):
        if id(node) in for_annotations:
            continue
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            module = ".".join(part for part in (base, node.module) if part)
            names += [module] + [f"{module}.{alias.name}" for alias in node.names]
    return [name for name in names if name.startswith("dataflex_rl.")]


def _type_checking(test: ast.expr) -> bool:
    """`TYPE_CHECKING` or `typing.TYPE_CHECKING`."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def package_imports() -> dict[str, set[str]]:
    """unit -> the other units it imports (a `from dataflex_rl import x` counts as importing x when x is a unit)."""
    units = {_unit(path) for path in PACKAGE.rglob("*.py") if path.name != "__init__.py" or path.parent != PACKAGE}
    graph: dict[str, set[str]] = {unit: set() for unit in units}
    for path in PACKAGE.rglob("*.py"):
        if path.parent == PACKAGE and path.name == "__init__.py":
            continue
        source = _unit(path)
        for name in _imported_modules(path):
            target = name.split(".")[1]
            if target in units and target != source:
                graph[source].add(target)
    return graph


def _module(path: Path) -> str:
    """The dotted name of a source file's module (a package's `__init__.py`: the package)."""
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports() -> dict[str, set[str]]:
    """module -> the other dataflex_rl modules it imports (`from package import name` counts as importing the
    module `package.name` where that is one, else the package)."""
    modules = {_module(path): path for path in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for module, path in modules.items():
        for name in _imported_modules(path):
            while name not in modules:
                name = name.rpartition(".")[0]
            if name != module:
                graph[module].add(name)
    return graph


def package_cycles(graph: dict[str, set[str]] | None = None) -> list[tuple[str, ...]]:
    """Every elementary cycle of the unit graph, each once, starting at its alphabetically first unit."""
    graph = package_imports() if graph is None else graph
    cycles = []

    def walk(start: str, node: str, path: list[str]) -> None:
        for nxt in sorted(graph[node]):
            if nxt == start:
                cycles.append(tuple(path))
            elif nxt > start and nxt not in path:
                walk(start, nxt, path + [nxt])

    for start in sorted(graph):
        walk(start, start, [start])
    return cycles


def test_the_cycle_finder_sees_direct_and_longer_cycles():
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": {"d"}, "d": {"b"}, "e": {"a"}}
    assert package_cycles(graph) == [("a", "b"), ("b", "c", "d")]


def test_the_import_reader_resolves_relative_and_lazy_imports(tmp_path):
    package = tmp_path / "dataflex_rl"
    (package / "one").mkdir(parents=True)
    (package / "one" / "mod.py").write_text("from . import sibling\nfrom ..two.x import y\n"
                                            "def f():\n    import dataflex_rl.three\n"
                                            "if TYPE_CHECKING:\n    from dataflex_rl.four import Type\n"
                                            "if typing.TYPE_CHECKING:\n    import dataflex_rl.five\n")
    assert set(_imported_modules(package / "one" / "mod.py", package)) == {
        "dataflex_rl.one", "dataflex_rl.one.sibling", "dataflex_rl.two.x", "dataflex_rl.two.x.y", "dataflex_rl.three"}


def test_no_package_import_cycle():
    assert package_cycles() == []


def test_no_module_import_cycle():
    """Inside a package too (a registry kept in the interface module its backends import was one such cycle)."""
    assert package_cycles(module_imports()) == []


if __name__ == "__main__":
    for cycle in package_cycles() + package_cycles(module_imports()):
        print(" -> ".join(cycle + cycle[:1]))
