"""The package draws the architecture: no module imports from a room on its own floor or above (docs/layout.md), and no
strategy is written twice (no dispatch on policy classes anywhere in the library)."""
import ast
from pathlib import Path

import pytest

LIB = Path(__file__).resolve().parents[1] / "lib" / "spectree"
# the floors of docs/layout.md, lowest first; a module may import its own room (top-level folder or module) and the
# rooms below it, never a room above or beside it
RANK = {"__init__": 0, "core": 0, "claims": 1, "drafts": 1, "prompt_files": 1, "retrieval": 1, "prompts": 2,
        "strategies": 2, "models": 3, "replay": 4, "training": 4, "analysis": 5, "figures": 6, "speed": 6,
        "pricing": 7, "reports": 7, "explorer": 8, "gpu": 8, "projection": 8, "runs": 8, "quality": 9, "tune": 9,
        "cli": 10, "__main__": 11}


def layer_of(module: str) -> str:
    """'spectree.core.tree' → 'core'; 'spectree.cli' → 'cli'."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every spectree import in a file, those inside functions too."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "spectree":
            names = [node.module] if node.module != "spectree" else [f"spectree.{a.name}" for a in node.names]
            out += [(node.lineno, n) for n in names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "spectree"]
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}:{node.lineno}: relative import; the library imports spectree.* by name")
    return out


MODULES = sorted(LIB.rglob("*.py"))


def test_every_module_sits_in_a_known_layer():
    for path in MODULES:
        module = ".".join(("spectree", *path.relative_to(LIB).with_suffix("").parts))
        assert layer_of(module) in RANK or path.name == "__init__.py", module


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(LIB)))
def test_no_import_runs_from_a_lower_layer_to_a_higher_one(path):
    own = layer_of(".".join(("spectree", *path.relative_to(LIB).with_suffix("").parts)))
    for line, module in imports(path):
        other = layer_of(module)
        assert other == own or RANK[other] < RANK[own], (f"{path.relative_to(LIB)}:{line} ({own}) imports {module} "
                                                         f"({other}): a layer may only import the ones below it")


def policy_dispatch(source: str, names: set[str]) -> list[int]:
    """Lines of `source` that call isinstance / issubclass on one of the classes `names`."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("isinstance", "issubclass"):
            named = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
            named |= {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}
            lines += [node.lineno] if named & names else []
    return lines


def test_no_isinstance_dispatch_on_policy_classes():
    import importlib
    import pkgutil

    from spectree import strategies
    from spectree.core.policy import Policy

    modules = [importlib.import_module(f"spectree.strategies.{m.name}")
               for m in pkgutil.iter_modules(strategies.__path__)]
    names = {name for module in modules for name, obj in vars(module).items()
             if isinstance(obj, type) and issubclass(obj, Policy)}
    names |= {"Policy", "LogTree"}
    assert policy_dispatch("if isinstance(p, (Kary, strategies.PCT)):\n    pass", names) == [1]  # the check works
    for path in MODULES:
        assert not policy_dispatch(path.read_text(), names), f"{path.relative_to(LIB)} dispatches on a policy class"
