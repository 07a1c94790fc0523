"""README.md reads in order: every word of its glossary is defined before it is used, it stays a reference
(≤ 300 lines), and its first section is the tour a newcomer can run."""
import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
GLOSSARY = ("τ", "γ", "α", "λ", "s_d/s_t", "bar", "verdict", "logbook", "replay")


def _pattern(word: str) -> re.Pattern:
    return re.compile(rf"(?<![\w/]){re.escape(word)}(?![\w/])")


def test_every_glossary_word_is_defined_before_its_first_use():
    text = README.read_text()
    lines = text.splitlines()
    rows = {i: line for i, line in enumerate(lines) if line.startswith("| ")}
    for word in GLOSSARY:
        row = next((i for i, line in rows.items() if re.match(rf"\| [^|]*{re.escape(word)}[^|]*\|", line)), None)
        assert row is not None, f"README's glossary has no row for {word!r}"
        for i, line in enumerate(lines[:row]):
            line = re.sub(r"`[^`]*`", "", line)  # code (a module path, a spec) is not prose
            for hit in _pattern(word).finditer(line):
                # a use before the glossary must define the word in place: "... per target forward (τ)"
                assert line[max(0, hit.start() - 1):hit.end() + 1] == f"({word})", \
                    f"README line {i + 1} uses {word!r} before the glossary defines it: {line.strip()!r}"


def test_readme_stays_a_reference_and_opens_with_the_tour():
    text = README.read_text()
    assert len(text.splitlines()) <= 300
    first = text.split("\n## ")[1]
    assert first.startswith("Five minutes") and "python -m spectree try" in first
    assert "identical to HF generate: True" in first
