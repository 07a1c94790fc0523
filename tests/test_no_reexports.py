"""Each name is imported from the module that defines it: the verdict constants from `analysis.verdicts`, never
through `analysis.claims`, which only uses them."""
import ast
from pathlib import Path

from spectree.analysis import verdicts

ROOT = Path(__file__).resolve().parents[1]
VERDICT_NAMES = {n for n in vars(verdicts) if not n.startswith("_")} - {"annotations"}


def test_no_module_imports_a_verdict_name_through_claims():
    found = []
    for path in [*ROOT.joinpath("lib").rglob("*.py"), *ROOT.joinpath("tests").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "spectree.analysis.claims":
                found += [f"{path.relative_to(ROOT)}:{node.lineno} {a.name}" for a in node.names if a.name in VERDICT_NAMES]
    assert not found, f"import these from spectree.analysis.verdicts: {found}"
