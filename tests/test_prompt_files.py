"""Prompt files in prompt specs (`jsonl:PATH[:N]`), their identity in cache keys, and per-category speed."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from spectree.analysis.token_tables import prompt_spec
from spectree.core.errors import SpectreeError
from spectree.prompt_files import read_prompt_file, split_part
from spectree.prompts import Prompt, load_prompts, parse_prompt_spec, prompt_set_identity
from spectree.replay.logbook import logbook_tag
from spectree.runs.runner import prompt_file_inputs, run_inputs
from spectree.speed.bench import Run
from spectree.speed.references import HF
from spectree.speed.tables import by_category
from helpers import offline_home, refuse

MTBENCH_LINES = [
    {"question_id": 81, "category": "writing", "turns": ["Write a travel blog post.", "Rewrite it."]},
    {"question_id": 101, "category": "reasoning", "turns": ["Who is the second runner?"]},
    {"question_id": 121, "category": "coding", "turns": ["Write a Python function.", "Now in C."]},
]
SIMPLE_LINES = [{"prompt": "Explain speculative decoding."}, {"prompt": "Sort a list.", "category": "code"},
                {"prompt": "Name a prime.", "id": "p7", "category": "math"}]


def write_jsonl(path: Path, rows: list, blank_after: int | None = None) -> Path:
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    if blank_after is not None:
        lines.insert(blank_after, "   ")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def mtbench_file(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "my_questions.jsonl", MTBENCH_LINES)


@pytest.fixture
def simple_file(tmp_path: Path) -> Path:
    return write_jsonl(tmp_path / "simple.jsonl", SIMPLE_LINES, blank_after=1)


def test_mtbench_format_first_turn_category_and_key(mtbench_file: Path) -> None:
    prompts = parse_prompt_spec(f"jsonl:{mtbench_file}")
    assert prompts == [Prompt("jsonl:my_questions", "81", "writing", "Write a travel blog post."),
                       Prompt("jsonl:my_questions", "101", "reasoning", "Who is the second runner?"),
                       Prompt("jsonl:my_questions", "121", "coding", "Write a Python function.")]
    assert [p.key for p in prompts] == ["jsonl:my_questions/81", "jsonl:my_questions/101", "jsonl:my_questions/121"]


def test_same_conventions_as_the_builtin_mtbench(tmp_path: Path) -> None:
    """A copy of MT-bench's own question lines gives the built-in set's ids, categories and texts."""
    builtin = load_prompts("mtbench", 3)
    rows = [{"question_id": int(p.id), "category": p.category, "turns": [p.text, "next"]} for p in builtin]
    copy = parse_prompt_spec(f"jsonl:{write_jsonl(tmp_path / 'question.jsonl', rows)}")
    assert [(p.id, p.category, p.text) for p in copy] == [(p.id, p.category, p.text) for p in builtin]
    assert {p.key for p in copy}.isdisjoint(p.key for p in builtin)  # both in one spec stay apart


def test_simple_format_ids_default_to_line_numbers_and_category_to_stem(simple_file: Path) -> None:
    prompts = read_prompt_file(simple_file)
    assert [(p.id, p.category, p.text) for p in prompts] == [
        ("1", "simple", "Explain speculative decoding."), ("3", "code", "Sort a list."),
        ("p7", "math", "Name a prime.")]


def test_count_slices_in_file_order_and_joins_with_builtin_sets(mtbench_file: Path, simple_file: Path) -> None:
    assert parse_prompt_spec(f"jsonl:{mtbench_file}:2") == [Prompt(*r) for r in read_prompt_file(mtbench_file)[:2]]
    both = parse_prompt_spec(f"mtbench:2 + jsonl:{simple_file}:1+jsonl:{mtbench_file}")
    assert [p.dataset for p in both] == ["mtbench"] * 2 + ["jsonl:simple"] + ["jsonl:my_questions"] * 3
    assert len({p.key for p in both}) == 6


def test_keys_stable_across_reads_and_folders(tmp_path: Path, mtbench_file: Path) -> None:
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    copy = write_jsonl(moved / mtbench_file.name, MTBENCH_LINES)
    keys = [p.key for p in parse_prompt_spec(f"jsonl:{mtbench_file}")]
    assert [p.key for p in parse_prompt_spec(f"jsonl:{mtbench_file}")] == keys  # read again
    assert [p.key for p in parse_prompt_spec(f"jsonl:{copy}")] == keys  # moved


def test_path_with_colons_and_relative_path(tmp_path: Path, monkeypatch) -> None:
    odd = tmp_path / "run:2024"
    odd.mkdir()
    path = write_jsonl(odd / "q.jsonl", SIMPLE_LINES)
    assert split_part(f"jsonl:{path}:2") == (path, 2)
    assert split_part(f"jsonl:{path}") == (path, None)
    assert len(parse_prompt_spec(f"jsonl:{path}:2")) == 2
    monkeypatch.chdir(odd)
    assert len(parse_prompt_spec("jsonl:q.jsonl")) == 3


@pytest.mark.parametrize("line, says", [
    ('{"prompt": "ok"', "line 3: not JSON"),
    ('["a list"]', "line 3: expected a JSON object, got list"),
    ('{"question": "x"}', 'line 3: expected "turns" (MT-bench) or "prompt", got neither'),
    ('{"prompt": "x", "turns": ["y"]}', 'line 3: expected "turns" (MT-bench) or "prompt", got both'),
    ('{"prompt": "   "}', "line 3: the prompt text is empty"),
    ('{"turns": []}', 'line 3: "turns" must be a non-empty list of strings'),
    ('{"turns": [1, 2]}', 'line 3: "turns" must be a non-empty list of strings'),
    ('{"prompt": 5}', 'line 3: "prompt" must be a string'),
    ('{"prompt": "x", "category": 3}', 'line 3: "category" must be a string'),
    ('{"prompt": "x", "id": [1]}', 'line 3: "id" must be an integer or a string'),
    ('{"question_id": 81, "turns": ["again"]}', "line 3: id '81' is already on line 1"),
])
def test_bad_line_names_file_and_line(tmp_path: Path, line: str, says: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join([json.dumps(MTBENCH_LINES[0]), json.dumps(MTBENCH_LINES[1]), line,
                               json.dumps(MTBENCH_LINES[2])]) + "\n", encoding="utf-8")
    with pytest.raises(SpectreeError) as err:
        parse_prompt_spec(f"mtbench:1+jsonl:{path}:1")  # every line is checked, not only the first N
    assert str(err.value).startswith(f"{path} {says}") and "\n" not in str(err.value)


@pytest.mark.parametrize("command", [["bench"], ["lossless"], ["log"]])
def test_cli_refuses_a_bad_line_before_any_model_loads(command, tmp_path: Path, monkeypatch, capsys) -> None:
    root = offline_home(tmp_path, monkeypatch)
    path = write_jsonl(tmp_path / "q.jsonl", [SIMPLE_LINES[0], "not json"])
    err = refuse(command + ["--prompts", f"jsonl:{path}"], capsys, root)
    assert f"{path} line 2: not JSON" in err


@pytest.mark.parametrize("spec_of, says", [
    (lambda d: f"jsonl:{d / 'missing.jsonl'}", "missing.jsonl does not exist"),
    (lambda d: f"jsonl:{d}", "is a folder"),
    (lambda d: f"jsonl:{write_jsonl(d / 'empty.jsonl', ['', ' '])}", "holds no prompts"),
    (lambda d: f"jsonl:{write_jsonl(d / 'three.jsonl', SIMPLE_LINES)}:4", "holds 3 prompts, not 4: ask for at most"),
    (lambda d: f"jsonl:{write_jsonl(d / 'three.jsonl', SIMPLE_LINES)}:0", "give a count >= 1"),
    (lambda d: f"jsonl:{write_jsonl(d / 'three.jsonl', SIMPLE_LINES)}:-2", "give a count >= 1"),
    (lambda d: "jsonl:", "names no file"),
    (lambda d: f"jsonl:{write_jsonl(d / 'a.jsonl', SIMPLE_LINES)}+jsonl:{d / 'a.jsonl'}:1", "twice"),
])
def test_bad_file_or_count(tmp_path: Path, spec_of, says: str) -> None:
    with pytest.raises(SpectreeError, match=says):
        parse_prompt_spec(spec_of(tmp_path))


def test_two_files_with_one_stem_refused(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, b = (write_jsonl(tmp_path / d / "q.jsonl", SIMPLE_LINES) for d in "ab")
    with pytest.raises(SpectreeError, match="two prompt files share the name 'q'"):
        parse_prompt_spec(f"jsonl:{a}+jsonl:{b}")


def test_not_utf8_refused(tmp_path: Path) -> None:
    path = tmp_path / "latin.jsonl"
    path.write_bytes('{"prompt": "caf\xe9"}\n'.encode("latin-1"))
    with pytest.raises(SpectreeError, match="is not UTF-8"):
        parse_prompt_spec(f"jsonl:{path}")


@pytest.mark.parametrize("spec", ["mtbench:8+humaneval:8", "mtbench:1", "mtbench", " mtbench:4 + humaneval:4"])
def test_builtin_spec_keys_unchanged(spec: str) -> None:
    assert prompt_set_identity(spec) == spec
    assert logbook_tag(spec) == "".join(spec.split()).replace(":", "").replace("+", "_")
    assert logbook_tag("mtbench:8+humaneval:8") == "mtbench8_humaneval8"


def test_identity_follows_content_not_path(tmp_path: Path, mtbench_file: Path) -> None:
    spec = f"mtbench:2+jsonl:{mtbench_file}:2"
    first = prompt_set_identity(spec)
    assert first.startswith("mtbench:2+jsonl-my_questions-") and first.endswith(":2")
    assert prompt_set_identity(spec) == first  # same content, same path
    stat = mtbench_file.stat()
    write_jsonl(mtbench_file, MTBENCH_LINES)  # rewritten, same bytes, newer mtime
    os.utime(mtbench_file, (stat.st_atime + 10, stat.st_mtime + 10))
    assert prompt_set_identity(spec) == first
    tag = logbook_tag(spec)
    assert tag.startswith("mtbench2_jsonl-my_questions-") and "/" not in tag and ":" not in tag
    write_jsonl(mtbench_file, [{**MTBENCH_LINES[0], "turns": ["Write a poem."]}, *MTBENCH_LINES[1:]])
    assert prompt_set_identity(spec) != first and logbook_tag(spec) != tag
    assert prompt_set_identity(f"jsonl:{mtbench_file}") != prompt_set_identity(f"jsonl:{mtbench_file}:2")


def test_identity_of_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SpectreeError, match="does not exist"):
        logbook_tag(f"jsonl:{tmp_path / 'gone.jsonl'}")


def test_notebook_manifest_keyed_by_file_content(tmp_path: Path, mtbench_file: Path) -> None:
    from spectree.core.paths import home

    notebook = home() / "notebooks" / "03_speed_benchmark.ipynb"
    builtin = {"pair": "smollm2-edd", "prompts": "mtbench:8+humaneval:8"}
    assert "prompt_files" not in run_inputs(notebook, "default", builtin)  # manifests as before
    assert prompt_file_inputs({"dataset": "mtbench+humaneval", "n_prompts": 12}) == {}
    params = {"pair": "smollm2-edd", "dataset": f"jsonl:{mtbench_file}", "n_prompts": 2}
    before = run_inputs(notebook, "default", params)
    assert before["prompt_files"] == {"dataset": prompt_set_identity(f"jsonl:{mtbench_file}")}
    write_jsonl(mtbench_file, MTBENCH_LINES[:2])
    assert run_inputs(notebook, "default", params)["prompt_files"] != before["prompt_files"]


def test_notebook_dataset_parameter_counts_prompt_files(mtbench_file: Path) -> None:
    assert prompt_spec(f"mtbench+jsonl:{mtbench_file}", 2) == f"mtbench:2+jsonl:{mtbench_file}:2"
    assert prompt_spec(f"jsonl:{mtbench_file}:1", 2) == f"jsonl:{mtbench_file}:1"


def _run(strategy: str, prompt: str, category: str, n: int, seconds: float, forwards: int) -> Run:
    return Run(strategy, prompt, category, list(range(n)), seconds, forwards, n, 0, 0.0, 0.0)


def test_by_category_tokens_per_s_and_speedup() -> None:
    runs = []
    timings = [("a", "writing", 1.0, 0.5), ("b", "code", 2.0, 0.5), ("c", "writing", 1.0, 1.0)]
    for prompt, category, hf_s, sd_s in timings:
        runs += [_run(HF, prompt, category, 10, hf_s, 10), _run("chain-2", prompt, category, 10, sd_s, 5)]
    table = by_category(runs)
    assert list(table.columns) == ["category", "method", "prompts", "tokens_per_s", "speedup", "tau"]
    assert table[["category", "method", "prompts"]].values.tolist() == [
        ["writing", "HF generate", 2], ["writing", "chain-2", 2], ["code", "HF generate", 1], ["code", "chain-2", 1]]
    assert table.tokens_per_s.tolist() == pytest.approx([10.0, 20 / 1.5, 5.0, 20.0])
    assert table.speedup.tolist() == pytest.approx([1.0, (20 / 1.5) / 10, 1.0, 4.0])
    assert table.tau.tolist() == pytest.approx([1.0, 2.0, 1.0, 2.0])
    assert by_category([]).empty
