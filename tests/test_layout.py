"""The package layout holds: imports run one way through the stages, no module imports itself back, the CLI is thin.

Read from the source with ``ast`` (every import, function-local ones included: a cycle held
apart by an import inside a function is still a cycle), so the check costs no import.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "src"

STAGES = "masking → text → blocks → collate/labelled → train → use → recipes → experiments → cli"
"""The stated order, as the README's layout section and every package's docstring say it."""

TOP_LEVEL = [{"settings"}, {"files"}, {"hub"}, {"plots"}]
ORDER = [*TOP_LEVEL, *({*stage.split("/")} for stage in STAGES.split(" → "))]
"""The stages, lowest first: a package imports only from stages below its own (and from itself);
the top-level modules come before every package."""

CLI_MAY_IMPORT = {"cli", "recipes", "experiments", "use", "settings"}
"""The command line calls the jobs (recipes, experiments, use) and reads the settings: nothing deeper."""


def _module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """``module -> tokenmask modules it imports`` (``from tokenmask.a import b`` counts ``tokenmask.a.b``
    when that is a module, else ``tokenmask.a``)."""
    modules = {_module_name(p): p for p in (SOURCE / "tokenmask").rglob("*.py")}
    graph: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in modules else node.module for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            graph[name].update(t for t in targets if t.startswith("tokenmask") and t != name)
    return {name: graph[name] for name in modules}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "tokenmask"


def _stage(package: str) -> int:
    return next(i for i, stage in enumerate(ORDER) if package in stage)


GRAPH = _imports()


def test_every_package_is_placed_in_the_order():
    packages = {_package(m) for m in GRAPH} - {"tokenmask", "__main__"}
    assert packages == set().union(*ORDER)


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if _package(m) not in ("tokenmask", "__main__")))
def test_imports_run_one_way(module):
    package = _package(module)
    upward = sorted(
        target
        for target in GRAPH[module]
        if _package(target) != package and _package(target) != "tokenmask" and _stage(_package(target)) >= _stage(package)
    )
    assert not upward, f"{module} imports from its own stage or above: {upward}"


def test_the_command_line_imports_only_the_jobs_and_the_settings():
    reached = {
        f"{m} -> {t}"
        for m in GRAPH
        if _package(m) == "cli"
        for t in GRAPH[m]
        if _package(t) not in CLI_MAY_IMPORT | {"tokenmask"}
    }
    assert not reached


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles of ``graph``: Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in graph.get(module, ()):
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycles():
    assert not cycles(GRAPH)


def test_the_checks_see_a_cycle_and_an_upward_import():
    """The checks above are not vacuous: the graph has edges, and made-up cycles are found."""
    assert sum(len(targets) for targets in GRAPH.values()) > 300
    assert "tokenmask.masking.config" in GRAPH["tokenmask.collate.collator"]
    assert _stage("masking") < _stage("collate") < _stage("train") < _stage("cli")
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    with_one = {**GRAPH, "tokenmask.masking.config": GRAPH["tokenmask.masking.config"] | {"tokenmask.collate.collator"}}
    assert any("tokenmask.collate.collator" in cycle for cycle in cycles(with_one))


@pytest.mark.parametrize("package", sorted(set().union(*ORDER[len(TOP_LEVEL) :])))
def test_every_package_states_the_same_order(package):
    docstring = ast.get_docstring(ast.parse((SOURCE / "tokenmask" / package / "__init__.py").read_text(encoding="utf-8")))
    assert docstring is not None and f"import order: {STAGES}." in docstring


def test_the_readme_states_the_same_order():
    readme = (SOURCE.parent / "README.md").read_text(encoding="utf-8")
    assert STAGES in " ".join(readme.split())
