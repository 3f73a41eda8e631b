"""The package's layering, read from its source: every import counts, deferred ones (inside
functions, under TYPE_CHECKING) too. Packages stack one way (ARCHITECTURE.md), bottom first:
errors, files, columns -> hardware -> traffic -> timing -> inputs -> training -> calibration ->
profiler -> engine -> device -> renderers -> cli. Inside the engine the estimate never
compiles: only `compare` and `sharded` reach the profiler, and none of it renders or parses."""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "f8roof"

STACK = (
    ("f8roof.errors",),
    ("f8roof.files",),
    ("f8roof.columns",),
    ("f8roof.notes",),
    ("f8roof.hardware",),
    ("f8roof.traffic",),
    ("f8roof.timing",),
    ("f8roof.inputs",),
    ("f8roof.training",),
    ("f8roof.calibration",),
    ("f8roof.profiler",),
    ("f8roof.engine",),
    ("f8roof.device",),
    ("f8roof.renderers",),
    ("f8roof.cli", "f8roof.__main__"),
)
# A layer may import its own package and every layer below it.
ALLOWED = {
    name: {below for layer in STACK[: i + 1] for below in layer}
    for i, layer in enumerate(STACK)
    for name in layer
}
# The engine's modules that decide an answer never compile, render or parse options.
ANSWERING = (
    "f8roof.engine.estimate",
    "f8roof.engine.resolve",
    "f8roof.engine.recommend",
    "f8roof.engine.step",
    "f8roof.engine.decision",
    "f8roof.engine.filter_compare",
    "f8roof.engine.report",
)
NEVER = {m: {"f8roof.profiler", "f8roof.engine.compare", "f8roof.engine.answer"} for m in ANSWERING}
# the package root (`f8roof.__version__`, the lazy `module_filter`) is imported from anywhere
ROOT_MODULE = "f8roof"


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


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m != ROOT_MODULE))
def test_imports_point_down(module):
    layer = layer_of(module)
    assert layer is not None, f"{module} is in no layer of STACK: place it"
    targets = {t for t in GRAPH[module] if t != ROOT_MODULE}
    upward = {t for t in targets if not _within(t, [layer, *ALLOWED[layer]])}
    assert not upward, f"{module} imports {sorted(upward)} above its layer ({layer})"
    never = next((NEVER[a] for a in ANSWERING if _within(module, [a])), set())
    bad = {t for t in targets if _within(t, never)}
    assert not bad, f"{module} imports {sorted(bad)}"


def test_the_layout_stays_navigable():
    """At most 8 modules at the top level besides __init__/__main__, at most 12 per folder."""
    top = [p for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert len(top) <= 8, sorted(p.name for p in top)
    for folder in (p for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
        assert len(modules) <= 12, f"{folder.name}: {len(modules)} modules"


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
        "f8roof.autofilter": {"f8roof.engine.report"},
        "f8roof.engine.report": {"f8roof.autofilter"},
        "f8roof.calibration": {"f8roof.files"},
        "f8roof.files": {"f8roof.render"},
        "f8roof.render": {"f8roof.engine.estimate"},
        "f8roof.engine.estimate": {"f8roof.calibration", "f8roof.profiler.capture"},
        "f8roof.profiler.capture": {"f8roof.profiler.device"},
        "f8roof.profiler.device": {"f8roof.calibration"},
        "f8roof.traffic.fit": {"f8roof.timing.overhead"},
        "f8roof.timing.overhead": {"f8roof.traffic.fit"},
    }
    found = cycles(old)
    assert ["f8roof.autofilter", "f8roof.engine.report"] in found
    assert ["f8roof.timing.overhead", "f8roof.traffic.fit"] in found
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
