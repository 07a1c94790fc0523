"""Shared fixtures: a tiny random Llama for fast unit tests, the real SmolLM2 pair for slow ones; the longest test
files first (`run_tests.sh` runs two test processes, each taking whole files: a long file started last would run
alone at the end)."""
from __future__ import annotations

import os

import pytest
from helpers import tiny_llama
from transformers import LlamaForCausalLM

os.environ.setdefault("SPECTREE_WORKERS", "1")  # `run_tests.sh` already runs two test processes


@pytest.fixture(scope="session")
def tiny_target() -> LlamaForCausalLM:
    return tiny_llama(0, layers=3)


@pytest.fixture(scope="session")
def smollm2_pair():
    from spectree.models.loading import load_pair

    return load_pair("smollm2-layerskip")


def pytest_collection_modifyitems(config, items):
    """Files with an end-to-end test first, then files that load the real target, then the rest (in order)."""
    rank = {}
    for item in items:
        file = item.nodeid.split("::", 1)[0]
        weight = 0 if item.get_closest_marker("e2e") else 1 if item.get_closest_marker("slow") else 2
        rank[file] = min(rank.get(file, 2), weight)
    items.sort(key=lambda item: rank[item.nodeid.split("::", 1)[0]])  # stable: collection order within a rank
