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
