"""The house has no import circle (issue 32): among the modules of transformer/, atlas_ui/ and viz/,
no module reaches itself again through imports, counting those inside functions (a lazy import
still ties two modules together, and farm-studio draws it so)."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("transformer", "atlas_ui", "viz")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    files = {module_name(p): p for package in PACKAGES for p in (REPO / package).rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in files}
    for name, path in files.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                # `from pkg import sub` names the submodule when there is one
                targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in files else base for alias in node.names]
            else:
                continue
            graph[name] |= {t for t in targets if t in files and t != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_check_finds_a_circle_through_a_lazy_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_back():
    graph = import_graph()
    assert len(graph) > 100 and "transformer" in graph["atlas_ui.runs.translation"]
    assert "transformer.hf.engine" in graph["transformer.translator"]              # a lazy import counts
    assert circles(graph) == []


# The app's layers, lowest first (issue 53): each package of atlas_ui/ imports only from its own layer or
# a lower one. ui/ (widget state, charts, shared figures) sits below the runs, the views and the page;
# the views never reach back into the page that lists them, nor the runs into either.
APP_LAYERS = ("atlas_ui.ui", "atlas_ui.runs", "atlas_ui.views", "atlas_ui.page")


def layer_of(module: str) -> int | None:
    for rank, package in enumerate(APP_LAYERS):
        if module == package or module.startswith(package + "."):
            return rank
    return None


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) pairs where a lower layer imports a higher one."""
    found = []
    for name, targets in graph.items():
        rank = layer_of(name)
        if rank is None:
            continue
        found += [(name, t) for t in sorted(targets) if (layer_of(t) or 0) > rank]
    return sorted(found)


def test_the_layer_check_finds_an_upward_import():
    graph = {"atlas_ui.views.heatmap": {"atlas_ui.page.common", "atlas_ui.ui.common"},
             "atlas_ui.runs.result": {"atlas_ui.ui.figures"}, "atlas_ui.ui.common": {"atlas_ui.server.settings"}}
    assert upward_imports(graph) == [("atlas_ui.views.heatmap", "atlas_ui.page.common")]


def test_the_app_imports_only_downwards():
    graph = import_graph()
    assert "atlas_ui.ui.figures" in graph["atlas_ui.runs.result"]                   # runs -> ui
    assert "atlas_ui.ui.common" in graph["atlas_ui.views.heatmap"]                 # views -> ui
    assert "atlas_ui.views" in graph["atlas_ui.page.main"]                          # page -> views
    assert upward_imports(graph) == []
