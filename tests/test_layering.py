"""The package's layering, read from its source: every import counts, deferred ones (inside
functions, under TYPE_CHECKING) too. Dependencies point one way (ARCHITECTURE.md):
cli -> renderers -> commands (estimate, compare, ...) -> calibration, architectures, inputs,
profiler -> models -> errors."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "f8roof"

# A module (or package) may import only these (its own package always).
ALLOWED = {
    "f8roof.errors": set(),
    "f8roof.files": {"f8roof.errors"},
    "f8roof.models": {"f8roof.errors"},
    "f8roof.profiler": {"f8roof.models", "f8roof.errors"},
    "f8roof.inputs": {"f8roof.models", "f8roof.errors", "f8roof.files"},
    "f8roof.calibration": {"f8roof.models", "f8roof.errors", "f8roof.files"},
    "f8roof.calibrations": {"f8roof.models", "f8roof.errors"},
    "f8roof.architectures": {"f8roof.models", "f8roof.errors", "f8roof.files", "f8roof.inputs"},
}
# Nothing below the command line renders or parses options, and the estimate never compiles.
NEVER = {
    "f8roof.estimate": {"f8roof.profiler", "f8roof.compare", "f8roof.renderers", "f8roof.cli"},
    "f8roof.resolve": {"f8roof.profiler", "f8roof.renderers", "f8roof.cli"},
    "f8roof.recommend": {"f8roof.profiler", "f8roof.renderers", "f8roof.cli"},
}
COMMANDS_NEVER = {"f8roof.renderers", "f8roof.cli"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(module: str) -> set[str]:
    """The f8roof modules `module` imports, anywhere in its file."""
    path = MODULES[module]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                here = here[: len(here) - node.level + 1]
                base = ".".join(here + ([base] if base else []))
            names = [f"{base}.{a.name}" for a in node.names] + [base]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name.startswith("f8roof") and name != module:
                found.add(name)
    return found


GRAPH = {m: imports(m) for m in MODULES}


def _within(name: str, prefixes) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def layer_of(module: str) -> str | None:
    return next((p for p in ALLOWED if _within(module, [p])), None)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module):
    layer = layer_of(module)
    targets = {t for t in GRAPH[module] if t != "f8roof"}  # the package root: __version__ only
    if layer is not None:
        upward = {t for t in targets if not _within(t, [layer, *ALLOWED[layer]])}
        assert not upward, f"{module} imports {sorted(upward)} above its layer ({layer})"
    never = NEVER.get(module, set()) | (
        COMMANDS_NEVER
        if not _within(module, ["f8roof.cli", "f8roof.renderers", "f8roof.__main__"])
        else set()
    )
    bad = {t for t in targets if _within(t, never)}
    assert not bad, f"{module} imports {sorted(bad)}"


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan). A package importing its
    own children (`__init__` re-exports) is no cycle of design and is left out."""
    graph = {m: {t for t in ts if not t.startswith(m + ".")} for m, ts in graph.items()}
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    assert cycles(GRAPH) == []


def test_cycle_finder_sees_deferred_import_cycles():
    """The four cycles this layout removed, as they were: each is found."""
    old = {
        "f8roof.autofilter": {"f8roof.report"},
        "f8roof.report": {"f8roof.autofilter"},
        "f8roof.calibration": {"f8roof.files"},
        "f8roof.files": {"f8roof.render"},
        "f8roof.render": {"f8roof.estimate"},
        "f8roof.estimate": {"f8roof.calibration", "f8roof.profiler.capture"},
        "f8roof.profiler.capture": {"f8roof.profiler.device"},
        "f8roof.profiler.device": {"f8roof.calibration"},
        "f8roof.models.fit": {"f8roof.models.overhead"},
        "f8roof.models.overhead": {"f8roof.models.fit"},
    }
    found = cycles(old)
    assert ["f8roof.autofilter", "f8roof.report"] in found
    assert ["f8roof.models.fit", "f8roof.models.overhead"] in found
    assert any("f8roof.profiler.device" in c and "f8roof.render" in c for c in found)


def test_architecture_md_lists_every_module():
    text = (PACKAGE.parent / "ARCHITECTURE.md").read_text()
    missing = [
        m
        for m, path in MODULES.items()
        if path.name != "__init__.py"
        and f"`{m.removeprefix('f8roof.').replace('.', '/')}" not in text
    ]
    assert not missing, f"ARCHITECTURE.md does not list {missing}"
