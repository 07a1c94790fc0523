"""The serving engines' tree rules (`strategies.engines`), each against an independent reading of the engine's source
on hundreds of random synthetic drafts (continuous probabilities: no ties): SGLang's EAGLE-2 tree
(sgl-project/sglang spec_utils.select_top_k_tokens + eagle_utils.organize_draft_results), TensorRT-LLM's dynamic tree
(tensorrt_llm/_torch/speculative/eagle3_dynamic_tree.py: the root out of its budget) and its static `eagle_choices`
(a node with c listed children drafts its top c); static choices parse, export and parse back to the same tree; the
emitted config text matches the engines' documented examples, and a tree an engine would not build is refused."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
import yaml
from helpers import grow_offline

from spectree.core.errors import SpectreeError
from spectree.core.tree import DraftTree, Nodes
from spectree.strategies import parse_strategy
from spectree.strategies.engines import Choices, format_paths, reranked


def random_offer(k: int, seed: int = 0):
    """k children per frontier node with seeded random, sorted probabilities (offer order = rank order, as top-k).
    A node's children depend on the node (its joint probability) and the seed only, not on the order in which a
    policy or a reference feeds its frontier."""
    def offer(tree: DraftTree, frontier: torch.Tensor) -> Nodes:
        f = len(frontier)
        rows = []
        for node in frontier.tolist():
            g = torch.Generator().manual_seed(seed * 1_000_003 + int(float(tree.joint[node]) * 2**40) % 2**31)
            rows.append(torch.rand(k, generator=g))
        p = torch.stack(rows).softmax(-1).sort(-1, descending=True).values  # [f, k]
        g = torch.Generator().manual_seed(seed)
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


def random_settings(n: int, seed: int) -> list[tuple[int, int, int, int]]:
    """n random (depth, topk, budget without the root, draft seed) within the engines' validation."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        depth, topk = int(rng.integers(1, 6)), int(rng.integers(1, 5))
        cap = topk + (depth - 1) * topk * topk
        out.append((depth, topk, int(rng.integers(depth, min(cap, topk * depth) + 1)), int(rng.integers(10_000))))
    return out


def test_sglang_tree_is_sglangs_rule_on_hundreds_of_random_drafts():
    for steps, topk, budget, seed in random_settings(200, 1):
        tokens = steps + 1 if topk == 1 else budget + 1  # topk 1: SGLang's chain
        grown = grow_offline(parse_strategy(f"sglang:steps={steps},topk={topk},tokens={tokens}"),
                             random_offer(topk, seed))
        assert len(grown) == tokens  # the verify width: tokens, root included
        assert paths_of(grown) == sglang_reference(steps, topk, tokens, random_offer(topk, seed)), (steps, topk, tokens)


def trtllm_reference(layers: int, topk: int, tokens: int, offer) -> set[tuple[float, ...]]:
    """TensorRT-LLM's dynamic tree read independently from eagle3_dynamic_tree.py: a history of every drafted token
    with its cumulative score and parent; layer 0 drafts the root's top-K; each later layer drafts the top-K children
    of the K history entries of the previous layer with the largest score; the final tree is the max_total_draft_tokens
    entries of the whole history with the largest score (the root is not in the history)."""
    tree = DraftTree.root(0, 5)
    history: list[int] = []  # node ids, in drafting order
    previous = torch.tensor([0])
    for _ in range(layers):
        layer = tree.add(offer(tree, previous)).tolist()
        history += layer
        scores = np.array([float(tree.joint[i]) for i in layer])
        previous = torch.tensor([layer[j] for j in np.argsort(-scores, kind="stable")[:topk]])
    scores = np.array([float(tree.joint[i]) for i in history])
    chosen = [history[j] for j in np.argsort(-scores, kind="stable")[:tokens]]
    return {tuple(round(float(tree.joint[j]), 9) for j in tree.path_to(i)) for i in chosen}


def test_trtllm_dynamic_tree_is_its_rule_on_hundreds_of_random_drafts():
    for layers, topk, tokens, seed in random_settings(200, 2):
        if topk == 1:
            tokens = layers  # K·L = L
        grown = grow_offline(parse_strategy(f"trtllm:layers={layers},topk={topk},tokens={tokens}"),
                             random_offer(topk, seed))
        assert len(grown) == tokens + 1  # max_total_draft_tokens leaves the root out
        assert paths_of(grown) == trtllm_reference(layers, topk, tokens, random_offer(topk, seed)), (layers, topk)


def eagle_choices_reference(listed) -> set[tuple[int, ...]]:
    """What TensorRT-LLM drafts for `eagle_choices` (spec_tree_manager: per node the number of listed children c, and
    the top-c tokens drafted there), as rank paths: walk the listed tree breadth first, counting children."""
    by_parent: dict[tuple, list] = {}
    for path in sorted(map(tuple, listed), key=lambda q: (len(q), q)):
        by_parent.setdefault(path[:-1], []).append(path)
    drafted, queue = set(), [((), ())]
    while queue:
        listed_node, rank_path = queue.pop(0)
        for i, child in enumerate(by_parent.get(listed_node, [])):  # the i-th listed child is drafted as rank i
            drafted.add(rank_path + (i,))
            queue.append((child, rank_path + (i,)))
    return drafted


def random_tree(rng: np.random.Generator, gaps: bool) -> frozenset:
    """A random rooted tree of rank paths (ranks < 4, depth ≤ 4), with or without skipped ranks."""
    shape, frontier = set(), [()]
    while frontier:
        parent = frontier.pop()
        if len(parent) == 4:
            continue
        c = int(rng.integers(0, 4 if parent else 3) + (0 if parent else 1))
        ranks = sorted(rng.choice(4, size=c, replace=False).tolist()) if gaps else list(range(c))
        for r in ranks:
            shape.add(parent + (r,))
            frontier.append(parent + (r,))
    return frozenset(shape)


def test_eagle_choices_are_drafted_as_trtllm_drafts_them_and_gaps_are_refused():
    rng = np.random.default_rng(3)
    for i in range(300):
        shape = random_tree(rng, gaps=i % 2 == 1)
        policy = Choices(paths=format_paths(shape))
        drafted = eagle_choices_reference(policy.listed())
        assert reranked(shape) == drafted
        if drafted == shape:  # no gaps: the config lists the tree, and the policy drafts the same ranks
            trt = yaml.safe_load(policy.engine_config("trtllm"))["speculative_config"]
            assert {tuple(p) for p in trt["eagle_choices"]} == shape
            grown = grow_offline(policy, random_offer(4, i))
            assert {tuple(int(grown.rank[j]) for j in grown.path_to(n)[1:]) for n in range(1, len(grown))} == shape
        else:
            with pytest.raises(SpectreeError, match="would be drafted as choices:paths=" + format_paths(drafted)):
                policy.engine_config("trtllm")
    with pytest.raises(SpectreeError, match=r"drafted as choices:paths=0/1;"):
        parse_strategy("choices:paths=0/2").engine_config("trtllm")


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
    with pytest.raises(SpectreeError, match="vLLM drafts a chain of num_speculative_tokens tokens"):
        policy.engine_config("vllm")
    assert json.loads(parse_strategy("choices:paths=0/0.0/0.0.0").engine_config("vllm"))["num_speculative_tokens"] == 3
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
    ours = yaml.safe_load(parse_strategy("trtllm:layers=6,topk=10,tokens=60").engine_config(
        "trtllm", "/path/to/eagle3_model", draft_kind="eagle3"))
    assert ours == {"speculative_config": documented}
    linear = yaml.safe_load(parse_strategy("choices:paths=0/0.0").engine_config("trtllm", "m"))["speculative_config"]
    assert linear["eagle_choices"] == [[0], [0, 0]] and linear["max_draft_len"] == 2
    vllm = json.loads(parse_strategy("choices:paths=0/0.0").engine_config("vllm", "yuhuili/EAGLE-LLaMA3-Instruct-8B"))
    assert vllm == {"method": "eagle", "model": "yuhuili/EAGLE-LLaMA3-Instruct-8B", "num_speculative_tokens": 2}
    assert "max_non_leaves_per_layer" not in parse_strategy("trtllm").engine_config("trtllm")


@pytest.mark.parametrize("engine, spec, eagle, eagle3", [
    ("sglang", "sglang", "--speculative-algorithm EAGLE ", "--speculative-algorithm EAGLE3 "),
    ("trtllm", "trtllm", "decoding_type: Eagle\n", "decoding_type: Eagle3\n"),
    ("trtllm", "choices:paths=0/1", "decoding_type: Eagle\n", "decoding_type: Eagle3\n"),
    ("vllm", "choices:paths=0/0.0", '"method": "eagle"', '"method": "eagle3"'),
])
def test_the_draft_kind_picks_each_engines_own_name(engine, spec, eagle, eagle3):
    policy = parse_strategy(spec)
    assert eagle in policy.engine_config(engine) and eagle3 in policy.engine_config(engine, draft_kind="eagle3")
    with pytest.raises(SpectreeError, match="use eagle .* or eagle3"):
        policy.engine_config(engine, draft_kind="medusa")


def test_the_command_line_offers_exactly_the_draft_kinds_the_engines_name():
    from spectree.cli import build_parser
    from spectree.strategies.engines import ALGORITHMS, DRAFT_KINDS

    tune_parser = build_parser()._subparsers._group_actions[0].choices["tune"]
    (kind,) = [a for a in tune_parser._actions if a.dest == "draft_kind"]
    assert tuple(kind.choices) == DRAFT_KINDS and all(set(names) == set(DRAFT_KINDS) for names in ALGORITHMS.values())


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
