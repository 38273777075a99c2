"""The layering of docs/ARCHITECTURE.md, read from the sources' imports with ``ast`` (no module
is imported, nothing is compiled). An import counts at module level or inside a function: an
import moved into a function hides a circle from Python, not from a reader. Imports under ``if
TYPE_CHECKING:`` or ``if __name__ == "__main__":`` never run when the module is imported, so
they close no circle; the rules on who may import whom read them too.

- No two modules of toolkit/ and wasm_runtime/ import each other, directly or through a longer
  circle. The one exception is the ONNX frontend's op plugin registry: ``translate.registry()``
  loads the op families, which register themselves into it and import its TranslateContext.
- The frontend (toolkit/frontend) imports nothing from toolkit/codegen or toolkit/program: it
  makes core ops, and knows nothing of how they run.
- toolkit/codegen imports nothing from the layers that call it (program, passes, ops, frontend).
- wasm_runtime imports nothing from toolkit: the runtime installs without the compiler.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("toolkit", "wasm_runtime")

FRONTEND_OPS = "toolkit.frontend.onnx.ops."
# the plugin registry: translate.registry() imports every op family, each of which imports
# translate (its TranslateContext and helpers)
REGISTRY = "toolkit.frontend.onnx.translate"
def modules() -> dict[str, Path]:
    out = {}
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _not_at_import(tree: ast.Module) -> set[int]:
    """The ids of the nodes under ``if TYPE_CHECKING:`` (they run under a type checker only)
    and ``if __name__ == "__main__":`` (they run when the file is a script, itself then the
    module ``__main__``): neither runs when the module is imported."""
    hidden = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "__name__ == '__main__'"):
            hidden.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return hidden


def imports(name: str, path: Path, known: dict[str, Path]) -> list[tuple[str, int, bool]]:
    """(module imported, line, not run at import: :func:`_not_at_import`) of each import in
    ``path`` that names a module of ``known``: ``from a import b`` names a.b when that is a
    module."""
    tree = ast.parse(path.read_text(), str(path))
    hidden = _not_at_import(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def deepest(dotted: str) -> str | None:
        while dotted and dotted not in known:
            dotted = dotted.rpartition(".")[0]
        return dotted or None

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [deepest(a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
            else:
                base = node.module
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else deepest(base) for a in node.names]
        else:
            continue
        found += [(t, node.lineno, id(node) in hidden) for t in targets if t is not None and t != name]
    return found


MODULES = modules()
EDGES = {m: imports(m, p, MODULES) for m, p in MODULES.items()}


def _where(a: str, b: str, at_import: bool = False) -> str:
    lines = sorted({ln for t, ln, hidden in EDGES[a] if t == b and not (at_import and hidden)})
    return f"{MODULES[a].relative_to(ROOT)}:{','.join(map(str, lines))} imports {b}"


def _graph() -> dict[str, set[str]]:
    """Who imports whom when modules are imported, less the registry's loading of the op
    families."""
    graph = {m: set() for m in MODULES}
    for m, found in EDGES.items():
        for t, _, hidden in found:
            if hidden or (m == REGISTRY and t.startswith(FRONTEND_OPS)):
                continue
            graph[m].add(t)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle through each strongly connected component of more than one module
    (Tarjan's algorithm, iterative), as the modules in import order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.add(w)
                    if w == v:
                        break
                if len(component) > 1:
                    components.append(component)
    return [_circle_in(graph, c) for c in components]


def _circle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest circle from the component's first module back to itself (breadth first)."""
    start = min(component)
    came_from = {start: None}
    queue = [start]
    for v in queue:
        for w in sorted(graph[v] & component):
            if w == start:
                path = [v]
                while came_from[path[-1]] is not None:
                    path.append(came_from[path[-1]])
                return path[::-1]
            if w not in came_from:
                came_from[w] = v
                queue.append(w)
    raise AssertionError(f"no circle in the component {sorted(component)}")


def test_no_module_imports_itself_through_others():
    circles = _circles(_graph())
    described = ["\n    ".join(_where(a, b, at_import=True) for a, b in zip(c, c[1:] + c[:1])) for c in circles]
    assert not circles, "import circles:\n  " + "\n  ".join(described)


def _reaching(source: str, forbidden: tuple[str, ...]) -> list[str]:
    return [_where(m, t) for m in sorted(EDGES) if m == source or m.startswith(source + ".")
            for t in sorted({t for t, _, _ in EDGES[m]}) if t.startswith(forbidden)]


def test_frontend_reaches_no_program_or_codegen():
    bad = _reaching("toolkit.frontend", ("toolkit.codegen", "toolkit.program"))
    assert not bad, "the frontend reaches below the core ops:\n  " + "\n  ".join(bad)


def test_codegen_imports_none_of_its_callers():
    bad = _reaching("toolkit.codegen", ("toolkit.program", "toolkit.passes", "toolkit.ops", "toolkit.frontend"))
    assert not bad, "codegen imports a layer above it:\n  " + "\n  ".join(bad)


def test_runtime_imports_nothing_of_the_compiler():
    bad = _reaching("wasm_runtime", ("toolkit",))
    assert not bad, "wasm_runtime imports the compiler:\n  " + "\n  ".join(bad)
