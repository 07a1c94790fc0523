"""Prompts of a set token length, cut from ShareGPT text: exact lengths on a byte tokenizer, ±8 on SmolLM2's."""
from __future__ import annotations

import pytest
from helpers import byte_tokenizer

import spectree.speed.lengths as lengths
from spectree.core.errors import SpectreeError
from spectree.prompts import chat_ids
from spectree.speed.lengths import INSTRUCTIONS, length_label, long_prompts

RECORDS = [{"id": str(i), "conversations": [{"from": "human", "value": f"question {i} " * 20},
                                            {"from": "system", "value": "never in a body"},
                                            {"from": "gpt", "value": f"answer {i} " * 40}]} for i in range(40)]


@pytest.fixture
def fake_sharegpt(monkeypatch):
    monkeypatch.setattr(lengths, "load_sharegpt_conversations", lambda: (RECORDS, 0))


def test_lengths_labels_instructions_and_nested_bodies(fake_sharegpt):
    tok = byte_tokenizer()
    prompts = long_prompts(tok, lengths=(128, 512, 1024), n=3)
    assert [p.key for p in prompts[:3]] == ["long/128-0", "long/128-1", "long/128-2"]
    assert [p.category for p in prompts[::3]] == ["128", "512", "1k"] and length_label(4096) == "4k"
    assert [len(chat_ids(tok, p.text)) for p in prompts] == [128] * 3 + [512] * 3 + [1024] * 3  # one byte a token
    assert [p.text.endswith("\n\n" + INSTRUCTIONS[i % 3]) for i, p in enumerate(prompts)] == [True] * 9
    short, long = prompts[0].text, prompts[6].text
    assert long.startswith(short[:-len("\n\n" + INSTRUCTIONS[0])]) and "never in a body" not in long
    assert prompts[1].text.split()[:2] != short.split()[:2]  # prompt 1 starts at the records after prompt 0's
    assert long_prompts(tok, lengths=(128, 512, 1024), n=3) == prompts  # deterministic
    assert long_prompts(tok, lengths=(512,), n=2) == prompts[3:5]  # whatever else is asked for
    one = long_prompts(tok, lengths=(200,), n=2, instruction="Copy the text above.")
    assert all(p.text.endswith("\n\nCopy the text above.") for p in one)


def test_the_bodies_pass_over_the_records_a_draft_was_trained_on(fake_sharegpt, tmp_path, monkeypatch):
    """A draft's card lists the ShareGPT records it drew its text from (`training_prompts`): no long prompt scored
    with that draft is cut from them (`training_records`, `exclude`)."""
    import json
    from types import SimpleNamespace

    tok = byte_tokenizer()
    plain = long_prompts(tok, lengths=(128,), n=2)
    assert "question 0 " in plain[0].text
    trained = {str(i) for i in range(0, 40, 2)}  # every even record
    skipped = long_prompts(tok, lengths=(128,), n=2, exclude=trained)
    words = {w for p in skipped for w in p.text.split() if w.isdigit()}
    assert words and all(int(w) % 2 for w in words)  # odd records only
    draft = SimpleNamespace(spec=SimpleNamespace(kind="edd", checkpoint=tmp_path / "d.safetensors"))
    monkeypatch.setattr("spectree.models.pairs.as_pair", lambda pair: draft)
    (tmp_path / "d.json").write_text(json.dumps({"training_prompts": {"sharegpt": sorted(trained), "how": "test"}}))
    assert lengths.training_records("t+edd:d") == frozenset(trained)
    (tmp_path / "d.json").write_text(json.dumps({"steps": 5}))  # a card that records none
    assert lengths.training_records("t+edd:d") == frozenset()


def test_impossible_requests_are_refused(fake_sharegpt):
    tok = byte_tokenizer()
    with pytest.raises(SpectreeError, match="leaves no room for a body"):
        long_prompts(tok, lengths=(40,), n=1)
    with pytest.raises(SpectreeError, match="fewer than 100 bodies"):
        long_prompts(tok, lengths=(128,), n=100)


def test_real_tokenizer_and_sharegpt_lengths_within_8_tokens():
    from spectree.models.pairs import target_tokenizer

    tok, config = target_tokenizer()  # the tokenizer from the GGUF's metadata, no weights (as tests/test_errors.py)
    prompts = long_prompts(tok, n=2)
    assert [p.id for p in prompts] == [f"{L}-{i}" for L in (256, 1024, 2048, 4096) for i in range(2)]
    for p in prompts:
        assert abs(len(chat_ids(tok, p.text)) - int(p.id.split("-")[0])) <= 8, p.key
    assert long_prompts(tok, lengths=(256,), n=2) == prompts[:2]
