"""The package's layout, read from its source (docs/layout.md): the imports between its modules form a graph with no
cycle, and so do the rooms they fall in (a top-level folder or module of lib/spectree); every name is imported from
the module that defines it, never through another that imported it (no re-exports); no room holds more than a fifth
of the package's lines; docs/layout.md and README name every room."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "lib" / "spectree"
MAX_ROOM_SHARE = 0.20  # of the package's lines


def module_name(path: Path) -> str:
    """lib/spectree/core/tree.py → 'spectree.core.tree'; lib/spectree/figures/__init__.py → 'spectree.figures'."""
    parts = ("spectree", *path.relative_to(LIB).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(LIB.rglob("*.py"))}


def room_of(module: str) -> str:
    """The top-level folder or module a module lies in: 'spectree.core.tree' → 'core'; 'spectree' → '__init__'."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imported_modules(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, module) of every spectree import in a module, those inside functions too; `from spectree.x import y`
    names spectree.x.y when y is a submodule, else spectree.x."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "spectree":
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                out.append((node.lineno, sub if sub in MODULES else node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "spectree"]
    return out


def import_graph() -> nx.DiGraph:
    """module → every module it imports (at its top or inside a function)."""
    graph = nx.DiGraph()
    graph.add_nodes_from(MODULES)
    for name, path in MODULES.items():
        graph.add_edges_from((name, other) for _, other in imported_modules(ast.parse(path.read_text()))
                             if other != name)
    return graph


def room_graph() -> nx.DiGraph:
    """room → every room one of its modules imports (the `__init__` room, the package's docstring, imports none)."""
    rooms = nx.DiGraph()
    rooms.add_nodes_from(room_of(m) for m in MODULES)
    rooms.add_edges_from((room_of(a), room_of(b)) for a, b in import_graph().edges if room_of(a) != room_of(b))
    return rooms


def floors(rooms: nx.DiGraph) -> list[list[str]]:
    """The rooms by floor, lowest first: a room stands one floor above the highest room it imports."""
    level: dict[str, int] = {}
    for room in reversed(list(nx.topological_sort(rooms))):
        level[room] = 1 + max((level[r] for r in rooms.successors(room)), default=-1)
    return [sorted(r for r, n in level.items() if n == i) for i in range(max(level.values()) + 1)]


def lines_of(path: Path) -> int:
    return len(path.read_text().splitlines())


def test_the_import_graph_has_no_cycle():
    cycles = list(nx.simple_cycles(import_graph()))
    assert not cycles, "import cycles: " + "; ".join(" → ".join(c + c[:1]) for c in cycles[:10])


def test_the_rooms_import_each_other_without_a_cycle():
    cycles = list(nx.simple_cycles(room_graph()))
    assert not cycles, "rooms importing each other: " + "; ".join(" → ".join(c + c[:1]) for c in cycles[:10])


def test_no_room_holds_more_than_a_fifth_of_the_package():
    sizes: dict[str, int] = {}
    for name, path in MODULES.items():
        sizes[room_of(name)] = sizes.get(room_of(name), 0) + lines_of(path)
    room, most = max(sizes.items(), key=lambda kv: kv[1])
    assert most <= MAX_ROOM_SHARE * sum(sizes.values()), f"{room}/ holds {most / sum(sizes.values()):.0%} of the lines"


def test_no_module_keeps_names_for_others_or_imports_at_its_end():
    """A `noqa: F401` keeps an unused import (a re-export); a `noqa: E402` an import below code."""
    found = [f"{p.relative_to(ROOT)}:{i}" for p in [*LIB.rglob("*.py"), *(ROOT / "scripts").rglob("*.py")]
             for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"noqa:.*\b(F401|E402)\b", line)]
    assert not found, found


# --- each name has one home -----------------------------------------------------------------------------------

def _bound(statements: list[ast.stmt]) -> set[str]:
    """The names a module body binds itself: functions, classes and assignments, also inside if / try / with blocks."""
    names: set[str] = set()
    for node in statements:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.For)):
            names |= _bound([*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", []),
                             *[s for h in getattr(node, "handlers", []) for s in h.body]])
    return names


DEFINED = {name: _bound(ast.parse(path.read_text()).body) | {m.rpartition(".")[2] for m in MODULES
                                                              if m.rpartition(".")[0] == name}
           for name, path in MODULES.items()}


def notebook_code(path: Path) -> str:
    cells = json.loads(path.read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    return "\n".join(line for cell in code for line in cell.splitlines() if not line.lstrip().startswith(("%", "!")))


SOURCES = {**{p: p.read_text() for d in ("lib", "tests", "scripts") for p in sorted((ROOT / d).rglob("*.py"))},
           **{p: notebook_code(p) for p in sorted((ROOT / "notebooks").glob("*.ipynb"))}}


def borrowed_names(tree: ast.AST) -> tuple[list[tuple[int, str, str]], list[tuple[int, str]]]:
    """(line, module, name) of each spectree name a file reaches: `from spectree.x import name` and `alias.name`
    where alias stands for a spectree module (through its submodules: `figures.speed.plot_speedups`); and (line,
    submodule) of each submodule reached as an attribute that the file does not import itself."""
    out, aliases, imported = [], {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "spectree":
            imported.add(node.module)
            for a in node.names:
                out.append((node.lineno, node.module, a.name))
                if f"{node.module}.{a.name}" in MODULES:
                    aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                    imported.add(f"{node.module}.{a.name}")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "spectree":
                    aliases[a.asname or "spectree"] = a.name if a.asname else "spectree"
                    imported |= {".".join(a.name.split(".")[:i]) for i in range(1, a.name.count(".") + 2)}
    unimported = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain, base = [node.attr], node.value
            while isinstance(base, ast.Attribute):
                chain.insert(0, base.attr)
                base = base.value
            if isinstance(base, ast.Name) and base.id in aliases:
                module = aliases[base.id]
                for attr in chain:
                    if f"{module}.{attr}" not in MODULES:
                        out.append((node.lineno, module, attr))
                        break
                    module = f"{module}.{attr}"
                    if module not in imported:
                        unimported.append((node.lineno, module))
    return out, unimported


@pytest.mark.parametrize("path", list(SOURCES), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_name_is_imported_from_the_module_that_defines_it(path):
    names, submodules = borrowed_names(ast.parse(SOURCES[path]))
    wrong = sorted({f"line {line}: {name} from {module}" for line, module, name in names
                    if module in MODULES and name not in DEFINED[module] and not name.startswith("__")})
    assert not wrong, f"{path.relative_to(ROOT)} reaches names where they are not defined: {wrong}"
    assert not submodules, f"{path.relative_to(ROOT)} reaches submodules it does not import: {sorted(set(submodules))}"


def _used(tree: ast.AST) -> set[str]:
    """Every name a module reads, string annotations ("str | Pair") included."""
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    for node in ast.walk(tree):
        annotations = [node.returns, *[a.annotation for a in ast.walk(node.args) if isinstance(a, ast.arg)]] \
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else \
            [node.annotation] if isinstance(node, ast.AnnAssign) else []
        for ann in annotations:
            if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
                names |= {n.id for n in ast.walk(ast.parse(ann.value, mode="eval")) if isinstance(n, ast.Name)}
    return names


@pytest.mark.parametrize("name", list(MODULES))
def test_every_module_uses_what_it_imports_and_lists_only_its_own_names(name):
    """An imported spectree name the module never reads, or one in its `__all__`, is kept for others to import."""
    tree = ast.parse(MODULES[name].read_text())
    used = _used(tree)
    unused = [f"line {node.lineno}: {a.asname or a.name}" for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "spectree"
              for a in node.names if (a.asname or a.name) not in used]
    exported = next((ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                     and any(getattr(t, "id", None) == "__all__" for t in n.targets)), [])
    assert not unused, f"{name} imports names it does not use: {unused}"
    assert set(exported) <= DEFINED[name], f"{name}'s __all__ lists names defined elsewhere: " \
                                           f"{sorted(set(exported) - DEFINED[name])}"


def test_docs_name_every_room_and_its_floor():
    """docs/layout.md's floor table is the room graph's, and it and README's "How it fits together" name every room
    (the package's own `__init__.py` and `__main__.py` aside)."""
    layout, readme = (ROOT / "docs" / "layout.md").read_text(), (ROOT / "README.md").read_text()
    rooms = room_graph()
    rooms.remove_nodes_from(["__init__", "__main__"])
    fits = readme.split("## How it fits together", 1)[1].split("\n## ", 1)[0]
    for room in rooms:
        shown = f"`{room}/`" if (LIB / room).is_dir() else f"`{room}.py`"
        assert shown in layout, f"docs/layout.md does not name {shown}"
        assert shown in fits, f"README's 'How it fits together' does not name {shown}"
    for i, floor in enumerate(floors(rooms)):
        listed = re.search(rf"^\| {i} \| (.*)\|$", layout, re.MULTILINE)
        assert listed, f"docs/layout.md lists no floor {i}"
        named = set(re.findall(r"`(\w+)(?:/|\.py)`", listed.group(1)))
        assert named == set(floor), f"floor {i} is {floor}, docs/layout.md says {sorted(named)}"
    assert not re.search(rf"^\| {len(floors(rooms))} \|", layout, re.MULTILINE), "docs/layout.md lists a floor too many"
