"""The package's floors: every import, function-level ones included, goes to the same floor or a
lower one, and no module imports itself back through others.

The floors are the README's architecture table (section "Floors"); this test reads them there,
so the document and the code cannot drift apart.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src"


def modules() -> dict[str, tuple[Path, bool]]:
    """Every module of the package: dotted name -> (file, is a package's ``__init__``)."""
    out = {}
    for path in sorted((SOURCE / "shoal").rglob("*.py")):
        parts = list(path.relative_to(SOURCE).with_suffix("").parts)
        package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if package else parts)] = (path, package)
    return out


class _Imports(ast.NodeVisitor):
    """The package's modules one module imports, at any depth but under ``if TYPE_CHECKING``."""

    def __init__(self, name: str, package: bool, known: set[str]):
        self.name, self.package, self.known, self.found = name, package, known, set()

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING":
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def _add(self, dotted: str) -> None:
        parts = dotted.split(".")
        while parts:  # the longest prefix that is a module: `from .a import f` imports shoal.x.a
            candidate = ".".join(parts)
            if candidate in self.known:
                if candidate != self.name:
                    self.found.add(candidate)
                return
            parts.pop()

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] == "shoal":
                self._add(alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.name.split(".")
            if not self.package:
                base = base[:-1]
            base = base[: len(base) - (node.level - 1)] + ([node.module] if node.module else [])
            module = ".".join(base)
        else:
            module = node.module or ""
        if module.split(".")[0] != "shoal":
            return
        self._add(module)  # `from pkg import x` runs pkg's __init__ first, whatever x is
        for alias in node.names:
            self._add(f"{module}.{alias.name}")


def import_graph() -> dict[str, set[str]]:
    known = modules()
    graph = {}
    for name, (path, package) in known.items():
        visitor = _Imports(name, package, set(known))
        visitor.visit(ast.parse(path.read_text(), str(path)))
        graph[name] = visitor.found
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        out.append(sorted(component))
    return out


def readme_floors() -> dict[str, int]:
    """Unit (a top-level module or subpackage of ``shoal``) -> its floor, from the README's table:
    rows ``| N | name | `unit`, `unit` ... | what |``."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### Floors", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    floors = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].isdigit():
            for unit in re.findall(r"`([a-z_.]+)`", cells[2]):
                floors[unit] = int(cells[0])
    return floors


def unit_of(module: str) -> str:
    parts = module.split(".")
    return "shoal" if len(parts) == 1 else parts[1]


def test_there_is_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_every_import_goes_to_the_same_floor_or_a_lower_one():
    floors = readme_floors()
    graph = import_graph()
    units = {unit_of(m) for m in graph}
    assert units <= set(floors), f"units on no floor of the README: {sorted(units - set(floors))}"
    assert set(floors) <= units, f"the README names units that do not exist: {sorted(set(floors) - units)}"
    upward = sorted(f"{a} (floor {floors[unit_of(a)]}) imports {b} (floor {floors[unit_of(b)]})"
                    for a, targets in graph.items() for b in targets if floors[unit_of(b)] > floors[unit_of(a)])
    assert not upward, "imports that reach up a floor:\n" + "\n".join(upward)


def test_the_checker_sees_function_level_imports_and_cycles():
    """The checks above could pass by seeing nothing: they must see a cycle made through a
    function-level import and ignore one under TYPE_CHECKING."""
    source = "def f():\n    from .b import g\n\nif TYPE_CHECKING:\n    from .c import h\n"
    visitor = _Imports("shoal.a", False, {"shoal.a", "shoal.b", "shoal.c"})
    visitor.visit(ast.parse(source))
    assert visitor.found == {"shoal.b"}
    # a sibling taken from its package runs the package's __init__: an edge to the package too
    visitor = _Imports("shoal.p.a", False, {"shoal.p", "shoal.p.a", "shoal.p.b"})
    visitor.visit(ast.parse("from . import b\n"))
    assert visitor.found == {"shoal.p", "shoal.p.b"}
    assert cycles({"shoal.a": {"shoal.b"}, "shoal.b": {"shoal.a"}, "shoal.c": set()}) == [["shoal.a", "shoal.b"]]
    assert len(import_graph()) > 100 and sum(map(len, import_graph().values())) > 300


def defined_names(path: Path) -> set[str]:
    """The names a module binds at its top level: definitions, assignments and imports (those
    under ``if``/``try`` too), read from its source, never by importing it."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def test_every_name_an_import_takes_from_the_package_exists():
    """An import inside a function runs only when the function does: a moved module or a renamed
    name there fails at run time, not on import. Every ``from shoal... import name`` must name a
    module of the package or a name its module binds."""
    known = modules()
    bound = {name: defined_names(path) for name, (path, _) in known.items()}
    missing = []
    for name, (path, package) in known.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = name.split(".") if package else name.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)] + ([node.module] if node.module else [])
                target = ".".join(base)
            else:
                target = node.module or ""
            if target.split(".")[0] != "shoal":
                continue
            if target not in known:
                missing.append(f"{path.relative_to(ROOT)}:{node.lineno}: no module {target}")
                continue
            missing += [f"{path.relative_to(ROOT)}:{node.lineno}: {target} has no {a.name}" for a in node.names
                        if a.name not in bound[target] and f"{target}.{a.name}" not in known]
    assert not missing, "\n".join(missing)
