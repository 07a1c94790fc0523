"""Shared fixtures: a tiny random Llama for fast unit tests, the real SmolLM2 pair for slow ones."""
from __future__ import annotations

import pytest
from helpers import tiny_llama
from transformers import LlamaForCausalLM


@pytest.fixture(scope="session")
def tiny_target() -> LlamaForCausalLM:
    return tiny_llama(0, layers=3)


@pytest.fixture(scope="session")
def smollm2_pair():
    from spectree.drafts.pairs import load_pair

    return load_pair("smollm2-layerskip")
