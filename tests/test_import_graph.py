"""pumice's modules form a layered graph: no import circles, no reaching into another
module's private names.

A circle means neither module can be understood, tested or loaded without the other, and a
lazy import inside a function only hides it: the dependency is still there, it just fails
later. So every import counts, wherever it sits, except those under ``if TYPE_CHECKING:``,
which never run. A name with a leading underscore is its module's own business; a module that
needs it from outside is a sign the name belongs in a shared, public place.

The graph code is plain functions over a source tree so the last test can feed it a
synthetic package and prove that it does report what it should.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "pumice"


@dataclass(frozen=True, slots=True)
class Import:
    """One import statement's effect: ``source`` depends on ``target``, written at
    ``where`` (file:line); ``names`` are the names a ``from`` import takes from it."""

    source: str
    target: str
    where: str
    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Module:
    """One parsed source file: ``where`` is its path as messages show it."""

    where: Path
    is_package: bool
    tree: ast.Module


def parse(root: Path, package: str) -> dict[str, Module]:
    """Every module of ``package`` under ``root`` by dotted name; a package's ``__init__.py``
    is the package's own name."""
    modules: dict[str, Module] = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        tree = ast.parse(path.read_text(), filename=str(path))
        where = path.relative_to(root.parent)
        modules[".".join(parts)] = Module(where, path.name == "__init__.py", tree)
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import that can run: at module level, in functions and classes, in ``try`` and
    ``else`` branches; not the body of ``if TYPE_CHECKING:``."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _base(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module a ``from`` import reads from, relative levels resolved."""
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    if not is_package:
        parts.pop()
    if node.level > 1:
        parts = parts[: len(parts) - (node.level - 1)]
    if node.module:
        parts.append(node.module)
    return ".".join(parts)


def imports(modules: dict[str, Module], package: str) -> list[Import]:
    """Every runtime import from one module of ``package`` to another (or to itself).

    ``import p.x.y`` depends on ``p.x.y``; ``from p.x import y`` on ``p.x.y`` when that is a
    module, else on ``p.x``. A package's ``__init__`` is a dependency only when an import
    names the package itself.
    """
    found: list[Import] = []
    for module, parsed in modules.items():
        for node in _runtime_imports(parsed.tree):
            where = f"{parsed.where}:{node.lineno}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in modules:
                        found.append(Import(module, alias.name, where, ()))
                continue
            base = _base(module, parsed.is_package, node)
            if base != package and not base.startswith(package + "."):
                continue
            plain: list[str] = []
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                if sub in modules:
                    found.append(Import(module, sub, where, ()))
                else:
                    plain.append(alias.name)
            if plain and base in modules:
                found.append(Import(module, base, where, tuple(plain)))
    return found


def graph(found: list[Import]) -> dict[str, set[str]]:
    """Module -> the modules it imports."""
    edges: dict[str, set[str]] = {}
    for imp in found:
        edges.setdefault(imp.source, set()).add(imp.target)
        edges.setdefault(imp.target, set())
    return edges


def strongly_connected(edges: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = []
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        work.append((start, iter(sorted(edges[start]))))
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return components


def cycles(found: list[Import]) -> list[str]:
    """One message per import circle: its modules and the import lines that close it."""
    edges = graph(found)
    messages: list[str] = []
    for component in strongly_connected(edges):
        members = set(component)
        if len(component) == 1 and component[0] not in edges[component[0]]:
            continue
        lines = sorted(
            f"    {imp.where}: {imp.source} -> {imp.target}"
            for imp in found
            if imp.source in members and imp.target in members
        )
        messages.append(
            f"circle of {len(component)} module(s): {', '.join(component)}\n" + "\n".join(lines)
        )
    return messages


def private_imports(found: list[Import]) -> list[str]:
    """Every import of an underscore name (not a dunder) from another module."""
    bad: list[str] = []
    for imp in found:
        if imp.source == imp.target:
            continue
        last = imp.target.rsplit(".", 1)[-1]
        taken = [n for n in imp.names if n.startswith("_") and not n.startswith("__")]
        if not imp.names and last.startswith("_") and not last.startswith("__"):
            taken.append(imp.target)
        bad.extend(f"{imp.where}: {imp.source} imports {n} from {imp.target}" for n in taken)
    return sorted(bad)


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def private_attributes(modules: dict[str, Module]) -> list[str]:
    """Every ``module._name`` read through an imported module (the same reach into
    another module as importing the name)."""
    bad: list[str] = []
    for module, parsed in modules.items():
        bound: dict[str, str] = {}  # local name -> the module it stands for
        for node in _runtime_imports(parsed.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname and alias.name in modules:
                        bound[alias.asname] = alias.name
                continue
            base = _base(module, parsed.is_package, node)
            for alias in node.names:
                if f"{base}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{base}.{alias.name}"
        for node in ast.walk(parsed.tree):
            if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
                continue
            if node.attr.startswith("__"):
                continue
            head = _dotted(node.value)
            if head is None:
                continue
            first, _, rest = head.partition(".")
            target = bound.get(first, first)
            target = f"{target}.{rest}" if rest else target
            if target in modules and target != module:
                bad.append(f"{parsed.where}:{node.lineno}: {module} reads {node.attr} of {target}")
    return sorted(bad)


@functools.cache
def pumice() -> dict[str, Module]:
    """pumice's own modules, parsed once for all the tests."""
    return parse(SRC, PACKAGE)


def test_no_import_circles() -> None:
    found = imports(pumice(), PACKAGE)
    assert found, "no pumice imports found: the check is not looking at the source"
    circles = cycles(found)
    assert not circles, "import circles in pumice:\n" + "\n".join(circles)


def test_nothing_imports_the_command_line() -> None:
    """``pumice.cli`` is the top: it wires every command, so a module importing it would
    depend on all of them (what a mode needs from the command line is passed in)."""
    users = [
        f"{i.where}: {i.source}" for i in imports(pumice(), PACKAGE) if i.target == "pumice.cli"
    ]
    assert not users, "pumice.cli imported by:\n" + "\n".join(users)


def test_no_private_names_across_modules() -> None:
    modules = pumice()
    bad = private_imports(imports(modules, PACKAGE)) + private_attributes(modules)
    assert not bad, "private names taken from another module:\n" + "\n".join(bad)


def test_the_check_reports_a_circle_and_a_private_import(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import _helper\n")
    (pkg / "b.py").write_text("def f():\n    from . import a\n    return a\n\n_helper = 1\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pkg import d\n"
        "from pkg.sub import e\n"
    )
    (pkg / "d.py").write_text("import pkg.c\n")
    (pkg / "sub" / "e.py").write_text("from ..d import x\n")
    (pkg / "f.py").write_text("from pkg import b\nimport pkg.c as c\nb._helper, c.__name__\n")
    modules = parse(tmp_path, "pkg")
    found = imports(modules, "pkg")
    circles = cycles(found)
    # a <-> b (b's import is lazy but counts); c -> sub.e -> d -> c (relative import resolved)
    assert len(circles) == 2, circles
    assert "pkg.a, pkg.b" in circles[0] or "pkg.a, pkg.b" in circles[1]
    ring = next(c for c in circles if "pkg.c" in c)
    assert "pkg.c, pkg.d, pkg.sub.e" in ring
    assert "pkg/sub/e.py:1" in ring
    # a type-only import is not an edge: dropping d -> c breaks the second circle
    (pkg / "d.py").write_text("")
    assert len(cycles(imports(parse(tmp_path, "pkg"), "pkg"))) == 1
    bad = private_imports(found)
    assert len(bad) == 1 and bad[0].endswith("pkg/a.py:1: pkg.a imports _helper from pkg.b"), bad
    read = private_attributes(modules)
    assert len(read) == 1 and read[0].endswith("pkg/f.py:3: pkg.f reads _helper of pkg.b"), read
