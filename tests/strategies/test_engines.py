"""The serving engines' tree rules (`strategies.engines`): SGLang's EAGLE-2 tree equals an independent reading of its
rule (sgl-project/sglang spec_utils.select_top_k_tokens + eagle_utils.organize_draft_results); TensorRT-LLM's dynamic
tree is the same rule with the root left out of its budget; static choices parse, export and parse back to the same
tree; the emitted config text matches the engines' documented examples."""
from __future__ import annotations

import ast
import json

import numpy as np
import pytest
import torch
import yaml
from helpers import grow_offline

from spectree.core.errors import SpectreeError
from spectree.core.tree import DraftTree, Nodes
from spectree.strategies import parse_strategy
from spectree.strategies.engines import Choices, format_paths, uniform


def random_offer(k: int, seed: int = 0):
    """k children per frontier node with seeded random, sorted probabilities (offer order = rank order, as top-k)."""
    def offer(tree: DraftTree, frontier: torch.Tensor) -> Nodes:
        g = torch.Generator().manual_seed(seed + 1000 * len(tree) + int(frontier.sum()))
        f = len(frontier)
        p = torch.rand(f, k, generator=g).softmax(-1).sort(-1, descending=True).values  # [f, k]
        parents = frontier[:, None].expand(f, k)
        return Nodes(tokens=torch.randint(0, 99, (f, k), generator=g).flatten(), parents=parents.flatten(),
                     depth=(tree.depth[parents] + 1).flatten(), draft_prob=p.flatten(),
                     joint=(tree.joint[parents] * p).flatten(), entropy=torch.ones(f * k),
                     entropy_topm=torch.ones(f * k), rank=torch.arange(k).repeat(f), confidence=p[:, 0].repeat_interleave(k))
    return offer


def sglang_reference(steps: int, topk: int, tokens: int, offer) -> set[tuple[float, ...]]:
    """SGLang's rule read independently: the root's top-k all expanded; each later step every expanded node's top-k
    children are candidates and the top-k of those by cumulative score are expanded; the top tokens − 1 of every
    candidate of every step are verified. Returns the kept nodes as their root paths of joint probabilities."""
    tree = DraftTree.root(0, 5)
    candidates: list[int] = []
    frontier = torch.tensor([0])
    for step in range(steps):
        new = tree.add(offer(tree, frontier))  # [len(frontier) * topk] node ids
        candidates += new.tolist()
        order = sorted(new.tolist(), key=lambda i: -float(tree.joint[i]))  # descending cumulative score
        frontier = torch.tensor(order[:topk])
    kept = sorted(candidates, key=lambda i: -float(tree.joint[i]))[:tokens - 1]
    return {tuple(round(float(tree.joint[j]), 9) for j in tree.path_to(i)) for i in kept}


def paths_of(tree: DraftTree) -> set[tuple[float, ...]]:
    return {tuple(round(float(tree.joint[j]), 9) for j in tree.path_to(i)) for i in range(1, len(tree))}


@pytest.mark.parametrize("steps, topk, tokens", [(3, 2, 6), (4, 3, 12), (5, 4, 8), (2, 4, 20), (6, 1, 7)])
def test_sglang_tree_is_sglangs_rule(steps, topk, tokens):
    policy = parse_strategy(f"sglang:steps={steps},topk={topk},tokens={tokens}")
    for seed in range(3):
        grown = grow_offline(policy, random_offer(topk, seed))
        assert len(grown) == tokens  # the verify width: tokens, root included
        assert paths_of(grown) == sglang_reference(steps, topk, tokens, random_offer(topk, seed))


def test_trtllm_dynamic_tree_is_sglangs_rule_with_the_root_out_of_its_budget():
    for seed in range(3):
        trt = grow_offline(parse_strategy("trtllm:layers=4,topk=3,tokens=9"), random_offer(3, seed))
        sgl = grow_offline(parse_strategy("sglang:steps=4,topk=3,tokens=10"), random_offer(3, seed))
        assert paths_of(trt) == paths_of(sgl) and len(trt) == 10
    capped = grow_offline(parse_strategy("trtllm:layers=4,topk=3,tokens=12,non_leaves=1"), random_offer(3))
    assert max(capped.depth.tolist()) == 4 and len(capped) == 13
    assert len(set(capped.parents[capped.depth >= 2].tolist()) - {0}) <= 3  # one expanded node per layer


@pytest.mark.parametrize("spec, message", [
    ("sglang:steps=3,topk=1,tokens=5", "with topk=1 SGLang sets tokens = steps \\+ 1 = 4"),
    ("sglang:steps=2,topk=2,tokens=8", "exceeds the 6 candidates"),
    ("trtllm:layers=3,topk=2,tokens=2", "3 <= tokens <= 6"),
    ("choices:paths=0/1.0", "path \\[1, 0\\] has no parent path \\[1\\]"),
    ("choices:paths=0/0/0.0", "none twice"),
    ("choices:paths=0,file=x.json", "one of them"),
])
def test_settings_an_engine_refuses_are_refused_here(spec, message):
    with pytest.raises(SpectreeError, match=message):
        parse_strategy(spec)


def test_choices_export_and_parse_back_to_the_same_tree(tmp_path):
    policy = parse_strategy("choices:paths=0/1/2/0.0/0.1/1.0/1.1/2.0/2.1/0.0.0")
    listed = policy.listed()
    assert listed[:4] == [[0], [1], [2], [0, 0]] and format_paths(policy.shape) == policy.paths
    (tmp_path / "choices.json").write_text(json.dumps(listed))
    assert Choices(file=str(tmp_path / "choices.json")).shape == policy.shape
    trt = yaml.safe_load(policy.engine_config("trtllm"))["speculative_config"]
    assert {tuple(p) for p in trt["eagle_choices"]} == policy.shape and trt["max_draft_len"] == 3
    uniform_tree = parse_strategy("choices:paths=0/1/2/0.0/0.1/1.0/1.1/2.0/2.1")
    vllm = json.loads(uniform_tree.engine_config("vllm"))
    assert set(ast.literal_eval(vllm["speculative_token_tree"])) == uniform_tree.shape
    assert vllm["num_speculative_tokens"] == 9
    assert not uniform(policy.shape) and uniform(uniform_tree.shape)
    with pytest.raises(SpectreeError, match="same number of children"):
        policy.engine_config("vllm")
    with pytest.raises(SpectreeError, match="not a setting sglang can take"):
        policy.engine_config("sglang")


def test_config_text_matches_the_engines_documented_examples():
    """SGLang docs/advanced_features/speculative_decoding.md (EAGLE-2 section, commit fc6d4653): --speculative-num-steps
    3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 16. TensorRT-LLM
    docs/source/features/speculative-decoding.md (Dynamic Tree Mode YAML, commit 04c8822c): decoding_type Eagle3,
    max_draft_len 6, use_dynamic_tree true, dynamic_tree_max_topK 10, max_total_draft_tokens 60. vLLM
    docs/features/speculative_decoding/eagle.md (commit 44c6aa26): {"method": "eagle", "model": ...,
    "num_speculative_tokens": 2}."""
    flags = parse_strategy("sglang:steps=3,topk=4,tokens=16").engine_config("sglang", "lmsys/sglang-EAGLE-llama2-chat-7B")
    assert flags.replace("\\\n", " ").split() == (
        "--speculative-algorithm EAGLE --speculative-draft-model-path lmsys/sglang-EAGLE-llama2-chat-7B "
        "--speculative-num-steps 3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 16").split()
    documented = {"decoding_type": "Eagle3", "max_draft_len": 6, "speculative_model": "/path/to/eagle3_model",
                  "use_dynamic_tree": True, "dynamic_tree_max_topK": 10, "max_total_draft_tokens": 60}
    ours = yaml.safe_load(parse_strategy("trtllm:layers=6,topk=10,tokens=60").engine_config("trtllm",
                                                                                             "/path/to/eagle3_model"))
    assert ours == {"speculative_config": documented}
    linear = yaml.safe_load(parse_strategy("choices:paths=0/0.0").engine_config("trtllm", "m"))["speculative_config"]
    assert linear["eagle_choices"] == [[0], [0, 0]] and linear["max_draft_len"] == 2
    vllm = json.loads(parse_strategy("choices:paths=0/0.0").engine_config("vllm", "yuhuili/EAGLE-LLaMA3-Instruct-8B"))
    assert vllm == {"method": "eagle", "model": "yuhuili/EAGLE-LLaMA3-Instruct-8B", "num_speculative_tokens": 2}


def test_engine_trees_keep_their_root_connected_under_ties():
    """Equal joint probabilities (a child drafted with p = 1) rank the shallower node first: no orphan is kept."""
    def certain(tree: DraftTree, frontier: torch.Tensor) -> Nodes:
        f, k = len(frontier), 2
        p = torch.tensor([1.0, 0.0]).repeat(f, 1)
        parents = frontier[:, None].expand(f, k)
        return Nodes(tokens=torch.arange(f * k), parents=parents.flatten(), depth=(tree.depth[parents] + 1).flatten(),
                     draft_prob=p.flatten(), joint=(tree.joint[parents] * p).flatten(), entropy=torch.zeros(f * k),
                     entropy_topm=torch.zeros(f * k), rank=torch.arange(k).repeat(f), confidence=torch.ones(f * k))
    grown = grow_offline(parse_strategy("sglang:steps=4,topk=2,tokens=4"), certain)
    parents = grown.parents.tolist()
    assert np.all([p < i for i, p in enumerate(parents) if i]) and grown.depth.tolist() == [0, 1, 2, 3]
