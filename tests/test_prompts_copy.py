"""The `copy` prompt set: ShareGPT turns that hand over text or code to summarize, rewrite or fix, and HumanEval."""
from __future__ import annotations

from collections import Counter

import pytest

from spectree.prompts import copy_category, load_prompts, parse_prompt_spec

CATEGORIES = ("summarize", "rewrite", "fix", "code")
ARTICLE = ("The city council met on Tuesday to discuss the new budget for the coming year. " * 10).strip()
CODE = "def mean(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total / len(x)\n" * 8


@pytest.fixture(scope="module")
def copy_set() -> list:
    return load_prompts("copy")


@pytest.mark.parametrize("n", [4, 8, 20])
def test_small_copy_spec_holds_every_category_in_turn(n: int) -> None:
    prompts = parse_prompt_spec(f"copy:{n}")
    assert len(prompts) == n
    assert [p.category for p in prompts[:4]] == list(CATEGORIES)
    assert {p.category for p in prompts} == set(CATEGORIES)


def test_rule_selects_requests_to_rework_given_material() -> None:
    assert copy_category(f"Please summarize the following article:\n\n{ARTICLE}") == "summarize"
    assert copy_category(f"{ARTICLE}\n\nTL;DR:") == "summarize"
    assert copy_category(f"Rewrite this paragraph in a friendlier tone:\n{ARTICLE}") == "rewrite"
    assert copy_category(f"Can you fix this code? It fails on empty lists.\n```python\n{CODE}```") == "fix"
    assert copy_category(f"```python\n{CODE}```\nI'm getting this error: NameError") == "fix"
    assert copy_category(f"Summarize and then fix this code:\n{CODE}") == "summarize"  # priority: summarize first


def test_rule_rejects_chit_chat_short_long_buried_and_non_english_turns() -> None:
    assert copy_category("Hi! How are you today? Can you summarize your day?") is None  # too short
    assert copy_category(f"Tell me a story about a dragon. {ARTICLE}") is None  # no instruction verb
    assert copy_category(f"Summarize this:\n{ARTICLE * 8}") is None  # over 6000 characters
    buried = f"{ARTICLE}\nPlease rewrite this paragraph.\n{ARTICLE}"
    assert len(buried) >= 600 and copy_category(buried) is None  # instruction far from both ends
    assert copy_category("Summarize this: " + "Городской совет обсудил новый бюджет. " * 20) is None  # not English


def test_every_prompt_within_length_bounds_and_categories(copy_set) -> None:
    counts = Counter(p.category for p in copy_set)
    assert set(counts) == set(CATEGORIES) and counts["code"] == 164
    assert all(counts[c] >= 50 for c in CATEGORIES)
    for p in copy_set:
        assert p.dataset == "copy" and len(p.text) <= 6000
        if p.category != "code":
            assert p.id.startswith("sharegpt/") and 600 <= len(p.text) and copy_category(p.text) == p.category


def test_code_prompts_are_humaneval_prompts(copy_set) -> None:
    code = [p for p in copy_set if p.category == "code"]
    assert [(p.id, p.text) for p in code] == [(f"humaneval/{p.id}", p.text) for p in load_prompts("humaneval")]


def test_copy_set_is_deterministic_with_unique_keys_and_texts(copy_set) -> None:
    assert load_prompts("copy") == copy_set == parse_prompt_spec("copy")
    assert load_prompts("copy", 10) == copy_set[:10]
    assert len({p.key for p in copy_set}) == len({p.text for p in copy_set}) == len(copy_set)
    assert copy_set[0].key.startswith("copy/sharegpt/")
