"""docs/fidelity.md names the code and the test behind each rule of each paper: every name must exist, and every
method the workbook reproduces must be traced there."""
import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "fidelity.md"
REFERENCE = re.compile(r"`((?:tests/)?[\w/]+\.py)::([\w.]+)`")
TRACED = ["C2T", "C2TClassifier", "Eagle2", "EagleTree", "Chain", "EntropyBranching", "NaiveWidth", "DySpec",
          "DySpecThreshold", "Sequences", "Sequoia", "PCT", "CAPE", "VCT", "Kary", "SGLang", "TRTLLM"]


def references() -> list[tuple[str, str]]:
    return REFERENCE.findall(DOC.read_text())


def test_every_code_symbol_and_test_named_in_fidelity_md_exists():
    refs = references()
    assert len(refs) > 60
    missing = []
    for path, symbol in refs:
        if path.startswith("tests/"):
            if not re.search(rf"^def {re.escape(symbol)}\(", (ROOT / path).read_text(), re.MULTILINE):
                missing.append(f"{path}::{symbol}")
            continue
        obj = importlib.import_module("spectree." + path[:-3].replace("/", "."))
        for part in symbol.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                missing.append(f"{path}::{symbol}")
                break
    assert not missing, missing


def test_every_reproduced_method_is_traced_in_fidelity_md():
    named = {symbol.split(".")[0] for _, symbol in references()}
    assert not set(TRACED) - named, sorted(set(TRACED) - named)


# every figure and table the notebooks reproduce or compare (issue 47), each with a row in "Figures and tables"
FIGURES = {"C2T": ["Fig. 2", "Fig. 4", "Fig. 9", "Fig. 10", "Table 1", "Table 2", "Table 3", "Table 4", "Table 5"],
           "Gunjur": ["Fig. 1", "Fig. 2", "Fig. 4", "Fig. 5", "Fig. 6"],
           "DySpec": ["Fig. 2", "Fig. 5", "Fig. 7", "Fig. 8", "Fig. 9", "Table 1", "Table 2", "Table 3", "Table 4",
                      "Table 5"],
           "EDD": ["Fig. 3", "Fig. 5", "Fig. 6", "Fig. 7", "Table 1", "Table 2", "Table 3"]}
ITEM = re.compile(r"(Figs?|Tables?)\.? (\d+)[a-z]?(?:–(\d+))?")


def covered() -> set[str]:
    """{"C2T Fig. 2", …}: the figures and tables named by the first cell of a row of the "Figures and tables" section
    ("DySpec Tables 1–2" names Table 1 and Table 2; "C2T Fig. 2a" names Fig. 2; parentheses are notes)."""
    section = DOC.read_text().split("## Figures and tables", 1)[-1].split("\n## ", 1)[0]
    out = set()
    for line in section.splitlines():
        first = line.split("|")[1].strip() if line.startswith("| ") else ""
        paper = first.split(" ", 1)[0]
        if paper not in FIGURES:
            continue
        for kind, lo, hi in ITEM.findall(re.sub(r"\([^)]*\)", "", first)):
            kind = "Fig." if kind.startswith("Fig") else "Table"
            out |= {f"{paper} {kind} {n}" for n in range(int(lo), int(hi or lo) + 1)}
    return out


def test_every_reproduced_figure_and_table_has_a_row_in_fidelity_md():
    assert "## Figures and tables" in DOC.read_text()
    wanted = {f"{paper} {item}" for paper, items in FIGURES.items() for item in items}
    assert not wanted - covered(), sorted(wanted - covered())
