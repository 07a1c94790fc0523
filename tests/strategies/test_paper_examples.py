"""Each paper's tree rule pinned by the paper's own setting, on made-up greedy drafts grown through the real `grow`
loop (`helpers.synthetic_draft`), and against independent references written from the algorithm boxes
(docs/fidelity.md cites the lines)."""
import heapq
import zlib
from dataclasses import dataclass
from typing import Optional

import numpy as np
import pytest
import torch
from helpers import grow_offline, synthetic_draft, tree_paths

from spectree.strategies import parse_strategy
from spectree.strategies.cape import CAPE
from spectree.strategies.chain import Chain
from spectree.strategies.dyspec import DySpec, DySpecThreshold
from spectree.strategies.eagle2 import Eagle2
from spectree.strategies.engines import SGLang
from spectree.strategies.gunjur import NaiveWidth
from spectree.strategies.pct import PCT
from spectree.strategies.static import VCT
from spectree.strategies.c2t import C2T, C2TClassifier


def random_draft(seed: int, width: int = 6):
    """A draft whose distribution at every path is a seeded random one (ranks in descending order; a little mass
    left off, as beyond the first `width` tokens)."""
    def probs(path):
        rng = np.random.default_rng(zlib.crc32(bytes([seed % 256, *path])) + seed)
        return sorted((0.95 * rng.dirichlet(np.full(width, 0.6))).tolist(), reverse=True)
    return probs


# --- DySpec (seed 002): Alg. 1 and Alg. 2 on slot values -------------------------------------------------------

def dyspec_heap(probs, m: int, K: Optional[int], d_max: int) -> set:
    """DySpec Alg. 1 as written: pop the slot of largest value v, draw its token y (greedy: the next rank), push
    the next-sibling slot v·(1 − R[y]) (R renormalised after removing y; in raw probabilities P(parent)·(1 − mass
    drawn)) and the child slot v·R[y] = P(y), until m tokens are drafted. K children per node (None: no cap, as
    Alg. 1 has none, s2 l.152–156: a node draws while its sibling slot is worth more than any other), depth d_max."""
    K = K if K is not None else float("inf")
    tree, count = set(), 0
    heap = [(-1.0, 0, (), 0, 1.0)]  # (−value, order, parent path, rank of the next draw, P(parent))
    while heap and len(tree) < m:
        neg, _, parent, k, p_parent = heapq.heappop(heap)
        if -neg <= 0:
            break
        q = probs(parent)
        node = parent + (k,)
        tree.add(node)
        count += 1
        if k + 1 < min(K, len(q)):
            heapq.heappush(heap, (-p_parent * (1 - sum(q[:k + 1])), count, parent, k + 1, p_parent))
        if len(node) < d_max:
            heapq.heappush(heap, (-p_parent * q[k], count + 0.5, node, 0, p_parent * q[k]))
    return tree


def dyspec_layers(probs, t: float, K: int, d_max: int) -> set:
    """DySpec Alg. 2 as written (with its `while v_i < t` read as `while v_i ≥ t`: the text says "we extend all nodes
    with estimated acceptance rate above the threshold"): every leaf keeps drawing children while its slot value is
    at least t; a new child's value is v_i·d_i[y] = its joint P."""
    tree, leaves = set(), [((), 1.0)]
    for _ in range(d_max):
        new = []
        for path, v in leaves:
            q, slot, k = probs(path), v, 0
            while slot >= t and k < min(K, len(q)):
                tree.add(path + (k,))
                new.append((path + (k,), v * q[k]))
                k += 1
                slot = v * (1 - sum(q[:k]))
        leaves = new
    return tree


def test_dyspec_keeps_a_sibling_slot_worth_more_than_a_likelier_grandchild():
    # the counterexample: root p = [0.4, 0.35, …], the first child's best child 0.9, m = 2. By joint P
    # {a, a1} (0.36 > 0.35); by slot value a's sibling slot is worth 1 − 0.4 = 0.6 > a's child slot 0.4: {a, b}
    draft = {(): [0.4, 0.35, 0.25], (0,): [0.9, 0.1], (1,): [0.5, 0.5], (2,): [0.5, 0.5]}
    tree = grow_offline(DySpec(m=2, K=3, d_max=3), synthetic_draft(lambda p: draft.get(p, [0.5, 0.5])))
    assert tree_paths(tree) == {(0,), (1,)} == dyspec_heap(lambda p: draft.get(p, [0.5, 0.5]), 2, 3, 3)


@pytest.mark.parametrize("seed", range(40))
def test_dyspec_budget_tree_is_alg1s_heap_tree(seed):
    rng = np.random.default_rng(seed)
    m, K, d_max = int(rng.integers(1, 25)), int(rng.integers(1, 5)), int(rng.integers(1, 6))
    probs = random_draft(seed)
    tree = grow_offline(DySpec(m=m, K=K, d_max=d_max), synthetic_draft(probs, K=K))
    assert tree_paths(tree) == dyspec_heap(probs, m, K, d_max)


def zipf_draft(seed: int, width: int = 120):
    """A Zipf-like draft (p_k ∝ (k + 1)^−s, s drawn per path in [0.9, 1.5], 0.97 of the mass on `width` tokens): its
    sibling slots 1 − Σ p fall slowly, so Alg. 1 keeps drawing siblings at a node long before it goes deeper."""
    def probs(path):
        rng = np.random.default_rng(zlib.crc32(bytes([seed % 256, *path])) + seed)
        w = np.arange(1, width + 1, dtype=float) ** -rng.uniform(0.9, 1.5)
        return (0.97 * w / w.sum()).tolist()
    return probs


@pytest.mark.parametrize("seed, m", [(0, 16), (1, 32), (2, 32), (3, 64), (4, 64)])
def test_dyspec_with_a_cap_that_cannot_bind_is_uncapped_alg1(seed, m):
    # DySpec Alg. 1 has no cap on children: a node keeps drawing while its sibling slot beats every other slot.
    # K = m cannot bind (m nodes hold at most m children of one node), so the tree must be the uncapped heap's
    # (a policy that capped children below K — say at 8 — would drop the root's later siblings)
    probs = zipf_draft(seed)
    reference = dyspec_heap(probs, m, None, 6)
    tree = grow_offline(DySpec(m=m, K=m, d_max=6), synthetic_draft(probs, K=m))
    assert tree_paths(tree) == reference and len(reference) == m
    root_children = sum(len(p) == 1 for p in reference)
    assert root_children > 8  # the reading: uncapped Alg. 1 puts well over 8 children at a Zipf-like root
    capped = grow_offline(DySpec(m=m, K=8, d_max=6), synthetic_draft(probs, K=8))
    assert tree_paths(capped) == dyspec_heap(probs, m, 8, 6) != reference  # K = 8 binds: another tree


def flat_draft(width: int = 40):
    """A flat draft: every path's distribution uniform over `width` tokens (0.98 of the mass). A root's sibling slots
    fall by 0.98/width a draw, so uncapped Alg. 1 draws most of the root's tokens before it goes deeper."""
    def probs(path):
        return [0.98 / width] * width
    return probs


@dataclass
class DySpecOfferingK(DySpec):
    """DySpec as live drafting ran it before `DySpec.limit`: every expanded node offered its K children."""

    max_nodes = None

    def width(self, frontier):
        return self.K

    def limit(self, offers, tree):
        return None

    def offer_cap(self):
        return None


@pytest.mark.parametrize("probs", [zipf_draft(5), flat_draft(40), random_draft(7, width=90)],
                         ids=["zipf", "flat", "random"])
def test_uncapped_dyspec_offers_a_layer_at_most_m_children_and_grows_alg1s_heap_tree(probs):
    # Alg. 1 holds at most m + 1 slots (it pops one, pushes a sibling and a child): live drafting offers a node's
    # children only while their slots can still be among the m best (`DySpec.limit`), so uncapped DySpec (K = m =
    # 64) offers each layer at most m candidates, not K per node — the heap's tree, as offering all K gives it
    m, d_max = 64, 8
    policy = DySpec(m=m, K=m, d_max=d_max)
    assert policy.oversized() is None and policy.worst_case() == (1 + d_max * m, d_max)
    tree = grow_offline(policy, synthetic_draft(probs, K=m))
    every = grow_offline(DySpecOfferingK(m=m, K=m, d_max=d_max), synthetic_draft(probs, K=m))
    reference = dyspec_heap(probs, m, None, d_max)
    assert tree_paths(tree) == tree_paths(every) == reference and len(reference) == m
    assert tree.offered <= (int(tree.depth.max()) + 1) * m  # at most m a layer (one past the deepest: offers only)
    assert tree.offered < every.offered
    kids = np.bincount(tree.parents[1:].numpy(), minlength=len(tree))
    assert kids.max() > 8  # more than 8 children under one node: a K = 8 cap binds
    capped = grow_offline(DySpec(m=m, K=8, d_max=d_max), synthetic_draft(probs, K=8))
    assert tree_paths(capped) == dyspec_heap(probs, m, 8, d_max) != reference


def test_uncapped_dyspec_runs_live_at_m_64_inside_the_node_guard(tiny_target):
    """`dyspec:m=64,K=64,d_max=8` on a Zipf-like draft (a random tiny model's head scaled up: trees 2–4 deep with
    18–41 root children) drafts live without the node guard firing (before `DySpec.limit` it offered 64 children a
    node: on a real prompt, 4,161 nodes at depth 2), is lossless, and grows the tree that offering every node its
    64 children grows, offering fewer; the guard still refuses a setting that cannot fit."""
    from helpers import tiny_llama

    from spectree.core.decode import speculative_generate

    ids, n = [3, 14, 15, 92, 65], 12
    with torch.inference_mode():
        ref = tiny_target.generate(torch.tensor([ids]), max_new_tokens=n, do_sample=False, eos_token_id=None,
                                   pad_token_id=0)[0, len(ids):].tolist()
    draft = tiny_llama(seed=1, layers=1)
    with torch.no_grad():
        draft.lm_head.weight.mul_(20.0)  # sharper than a random head's near-uniform distribution
    for d_max in (8, 11):
        assert DySpec(m=64, K=64, d_max=d_max).oversized() is None
    assert "lower m or K" in DySpec(m=1100, K=1100, d_max=2).oversized()
    policy = parse_strategy("dyspec:m=64,K=64,d_max=8")
    live = speculative_generate(tiny_target, draft, ids, policy, n, keep_trees=True)
    every = speculative_generate(tiny_target, draft, ids, DySpecOfferingK(m=64, K=64, d_max=8), n, keep_trees=True)
    assert live.tokens == every.tokens == ref
    for step, other in zip(live.steps, every.steps, strict=True):
        assert torch.equal(step.tree.tokens, other.tree.tokens) and torch.equal(step.tree.parents, other.tree.parents)
        assert step.gamma == 64 and step.offered <= (step.depth + 1) * 64 and step.offered < other.offered
    assert max(int(np.bincount(s.tree.parents[1:].numpy()).max()) for s in live.steps) > 8


def test_dyspec_threshold_draws_children_while_the_slot_is_worth_t():
    # a geometric draft, p_k = 2^-(k+1): the k-th child of u is kept while P(u)·2^-k ≥ t, though its own P is less
    def geometric(path):
        return [0.5 ** (k + 1) for k in range(8)]
    tree = grow_offline(DySpecThreshold(t=0.05, K=8, d_max=8), synthetic_draft(geometric))
    reference = dyspec_layers(geometric, 0.05, 8, 8)
    assert tree_paths(tree) == reference and len(reference) == 31
    by_own_p = {p for p in reference if np.prod([0.5 ** (r + 1) for r in p]) >= 0.05}
    assert len(by_own_p) == 15  # what keeping a child for its own P ≥ t gives


@pytest.mark.parametrize("seed", range(30))
def test_dyspec_threshold_tree_is_alg2s_tree(seed):
    rng = np.random.default_rng(100 + seed)
    t, K, d_max = float(rng.choice([0.3, 0.1, 0.05, 0.02])), int(rng.integers(1, 6)), int(rng.integers(1, 6))
    probs = random_draft(100 + seed)
    tree = grow_offline(DySpecThreshold(t=t, K=K, d_max=d_max), synthetic_draft(probs, K=K))
    assert tree_paths(tree) == dyspec_layers(probs, t, K, d_max)


# --- VCT as EDD ran it (seed 003 line ~1361: width 3, depth 5) --------------------------------------------------

def test_vct_is_the_full_3_ary_tree_of_depth_5():
    import itertools

    tree = grow_offline(VCT(w=3, d=5), synthetic_draft(random_draft(3)))  # the draft offers 6; VCT takes the top 3
    assert len(tree) - 1 == 3 + 9 + 27 + 81 + 243
    assert tree_paths(tree) == {p for d in range(1, 6) for p in itertools.product(range(3), repeat=d)}


# --- CAPE (seed 003 line ~614, its Table 2 settings at lines ~1362–1372) ---------------------------------------

def test_cape_expands_only_the_top1_node_of_each_layer_with_widths_7_5_3_1():
    conf = {(): 0.25, (0,): 0.5, (0, 0): 0.7, (0, 0, 0): 0.9, (0, 0, 0, 0): 0.25}  # buckets → widths 7, 5, 3, 1, 7

    def probs(path):
        c = conf.get(path, 0.25)
        return [c] + [(1 - c) / 8] * 8  # max probability c, nine tokens offered
    tree = grow_offline(CAPE(d=5), synthetic_draft(probs))
    widths = {(): 7, (0,): 5, (0, 0): 3, (0, 0, 0): 1, (0, 0, 0, 0): 7}
    assert tree_paths(tree) == {u + (r,) for u, w in widths.items() for r in range(w)}  # 23 nodes
    flat = grow_offline(CAPE(d=5), synthetic_draft(lambda path: [0.25] + [0.75 / 8] * 8))
    assert len(flat) - 1 == 35  # confidence 0.25 everywhere: 7 per layer, not 7 + 49 + … (every node expanded)


# --- EAGLE-2 as C2T describes it (seed 000 lines ~49–57) --------------------------------------------------------

def eagle2_reference(probs, K: int, d_max: int, N: int) -> set:
    """EAGLE-2 as C2T describes it (s0 l.49–57): "each token in current layer generates TopK tokens. Then, among all
    the generated tokens, the TopK tokens are selected to generate the next tree layer" — selected by joint
    probability P, EAGLE-2's value ("introduces the joint probability of each node as contextual information"),
    for d_max rounds (T1); then "use joint probability to rerank all nodes in T1, and then take the TopN" (T2; N
    counts the root, as `Eagle2` does: N − 1 draft tokens)."""
    joint, layer = {}, [((), 1.0)]
    for _ in range(d_max):
        new = [(u + (k,), p_u * q) for u, p_u in layer for k, q in enumerate(probs(u)[:K])]
        joint.update(new)
        layer = sorted(new, key=lambda node: -node[1])[:K]  # the layer's TopK by joint P go on
    return set(sorted(joint, key=lambda path: -joint[path])[:N - 1])


@pytest.mark.parametrize("seed", range(12))
def test_eagle2_expands_each_layers_top_k_by_joint_probability(seed):
    rng = np.random.default_rng(200 + seed)
    K, d_max = int(rng.integers(2, 5)), int(rng.integers(2, 5))
    probs = random_draft(200 + seed)
    t1_size = K + (d_max - 1) * K * K
    for N in (t1_size + 1, K * d_max + 1, K + 2):  # all of T1 (the expansion alone), then two reranks
        tree = grow_offline(Eagle2(K=K, d_max=d_max, N=N), synthetic_draft(probs, K=K))
        assert tree_paths(tree) == eagle2_reference(probs, K, d_max, N)


def test_eagle2_expands_the_likeliest_paths_not_the_likeliest_last_tokens():
    # layer 2 by joint P: (0, 0) .25, (0, 1) .225, (1, 0) .22, (1, 1) .18; by a node's own p (1, 0) .55 and (0, 0)
    # .5 would go on instead of (0, 0) and (0, 1)
    draft = {(): [0.5, 0.4, 0.1], (0,): [0.5, 0.45], (1,): [0.55, 0.45]}
    tree = grow_offline(Eagle2(K=2, d_max=3, N=99), synthetic_draft(lambda p: draft.get(p, [0.6, 0.4]), K=2))
    third = {p[:2] for p in tree_paths(tree) if len(p) == 3}
    assert third == {(0, 0), (0, 1)}
    assert tree_paths(tree) == eagle2_reference(lambda p: draft.get(p, [0.6, 0.4]), 2, 3, 99)


@pytest.mark.parametrize("K, d_max", [(2, 3), (3, 3), (4, 3), (3, 5)])
def test_eagle2_reranks_all_of_t1(K, d_max):
    probs = random_draft(7)
    # |T1|: K², not K, nodes drafted per later layer; N counts the root, so N = |T1| + 1 verifies all of T1 (C2T's
    # "TopN = 1011 (meaning no recall …)" at K 10, d_max 11: 10 + 10·100 = 1010 drafted nodes, s0 l.348)
    t1_size = K + (d_max - 1) * K * K
    t1 = grow_offline(Eagle2(K=K, d_max=d_max, N=t1_size + 1), synthetic_draft(probs, K=K))
    assert len(t1) == t1_size + 1
    assert len(grow_offline(Eagle2(K=K, d_max=d_max, N=t1_size), synthetic_draft(probs, K=K))) == t1_size
    # T2 is the top N − 1 of all of T1 by joint P, unexpanded nodes included, and the root
    n = K * d_max
    t2 = grow_offline(Eagle2(K=K, d_max=d_max, N=n + 1), synthetic_draft(probs, K=K))
    best = sorted(t1.joint[1:].tolist(), reverse=True)[:n]
    assert sorted(t2.joint[1:].tolist(), reverse=True) == pytest.approx(best)


def test_eagle2_and_sglang_build_the_same_tree():
    probs = random_draft(11)
    ours = grow_offline(Eagle2(K=4, d_max=5, N=8), synthetic_draft(probs, K=4))  # both count the root
    engine = grow_offline(SGLang(steps=5, topk=4, tokens=8), synthetic_draft(probs, K=4))
    assert tree_paths(ours) == tree_paths(engine)


# --- C2T Alg. 1 (seed 000 lines ~137–170): Fig. 3's β = 0.5, TopK = 2 ------------------------------------------

def classifier_of_p(bar: float) -> C2TClassifier:
    """A classifier of P alone whose confidence exceeds 0.5 exactly where P > bar (increasing in P)."""
    model = C2TClassifier(features=("P",), hidden=1)
    with torch.no_grad():
        first, _, last = model.net
        first.weight.fill_(1.0), first.bias.fill_(0.0), last.weight.fill_(40.0), last.bias.fill_(-40.0 * bar)
    return model.eval()


def test_c2t_scores_each_nodes_top_k_and_prunes_to_topk_per_layer():
    # Fig. 3's β = 0.5 and TopK = 2: each node's 2 likeliest children are scored (4 in layer 2, not the layer's 2
    # likeliest), those with C > β kept, the 2 most confident of each layer go on (per layer, not per tree)
    draft = {(): [0.5, 0.4, 0.1], (0,): [0.6, 0.4], (1,): [0.55, 0.45], (0, 0): [0.9, 0.1], (1, 0): [0.6, 0.4]}

    def grown(bar, topk, d_max=3):
        return tree_paths(grow_offline(C2T(beta=0.5, K=2, d_max=d_max, topk=topk, model=classifier_of_p(bar)),
                                       synthetic_draft(lambda p: draft.get(p, [0.5, 0.5]))))
    # layer 2 scores P .3 .2 (under (0,)) and .22 .18 (under (1,)): all above .1, the 3 most confident go on
    assert grown(0.1, topk=3, d_max=2) == {(0,), (1,), (0, 0), (1, 0), (0, 1)}
    assert grown(0.1, topk=0, d_max=2) == {(0,), (1,), (0, 0), (0, 1), (1, 0), (1, 1)}  # no second pruning
    assert grown(0.1, topk=2) == {(0,), (1,), (0, 0), (1, 0), (0, 0, 0), (1, 0, 0)}  # 2 per layer, 3 layers
    assert grown(0.21, topk=2) == {(0,), (1,), (0, 0), (1, 0), (0, 0, 0)}  # C ≤ β removes (0, 1), (1, 0, 0)…


def linear_classifier(w_p: float, w_h: float, w_d: float, bias: float) -> C2TClassifier:
    """A classifier of P, H and d whose logit is bias + w_P·P + w_H·H + w_d·d (one ReLU unit per sign)."""
    model = C2TClassifier(features=("P", "H", "d"), hidden=2)
    lin = torch.tensor([w_p, w_h, w_d])
    with torch.no_grad():
        first, _, last = model.net
        first.weight.copy_(torch.stack([lin, -lin])), first.bias.zero_()
        last.weight.copy_(torch.tensor([[1.0, -1.0]])), last.bias.fill_(bias)
    return model.eval()


def c2t_reference(probs, entropy, model: C2TClassifier, beta: float, K: int, topk: int, d_max: int) -> set:
    """C2T Alg. 1 (s0 l.137–170) with §4.2.2's second pruning, layer by layer: N ← the TopK likeliest children of
    every node of N (line 6, the first pruning: "calculate confidence only for the TopK tokens with the highest
    generation probability"); C_i = F(P_i, H_i, d_i) (P the path's product, H the entropy of the distribution i
    was drawn from, d its depth: our node depth, the classifier's input convention); nodes with C_i ≤ β leave N
    (lines 14–15); "we select only the TopK tokens with the highest confidence" (second pruning, per layer; 0:
    off) and "extend N or topK(N) to T" (line 21); stop at d_max or when no node passes (line 5). F is the
    classifier's torch forward, sigmoid(net(x)), on one node at a time."""
    tree, layer = set(), [((), 1.0)]
    for depth in range(1, d_max + 1):
        scored = []
        for u, p_u in layer:
            for k, q in enumerate(probs(u)[:K]):
                x = torch.tensor([[p_u * q, entropy(u), float(depth)]])
                with torch.no_grad():
                    scored.append((u + (k,), p_u * q, float(torch.sigmoid(model(x)))))
        passed = sorted((s for s in scored if s[2] > beta), key=lambda s: -s[2])  # by confidence, not by P
        layer = [(path, p) for path, p, _ in (passed[:topk] if topk else passed)]
        tree.update(path for path, _ in layer)
        if not layer:
            break
    return tree


def test_c2t_second_pruning_keeps_the_most_confident_not_the_likeliest():
    # a classifier that reads H and d (logit 4.5 + 10·P − 2·H − 0.1·d): layer 2's likeliest nodes (0, 0) .3 and
    # (0, 1) .2 were drawn from a flat distribution (H 3), (1, 0) .22 and (1, 1) .18 from a sharp one (H 0.5), so
    # the two most confident are (1, 0) and (1, 1); ranking by P would keep (0, 0) and (1, 0)
    draft = {(): [0.5, 0.4, 0.1], (0,): [0.6, 0.4], (1,): [0.55, 0.45]}
    h = {(): 1.0, (0,): 3.0, (1,): 0.5}
    model = linear_classifier(10.0, -2.0, -0.1, 4.5)
    offer = synthetic_draft(lambda p: draft.get(p, [0.5, 0.5]), lambda p: h.get(p, 1.0))
    tree = grow_offline(C2T(beta=0.5, K=2, d_max=2, topk=2, model=model), offer)
    assert tree_paths(tree) == {(0,), (1,), (1, 0), (1, 1)}
    assert tree_paths(tree) == c2t_reference(lambda p: draft.get(p, [0.5, 0.5]), lambda p: h.get(p, 1.0), model,
                                             0.5, 2, 2, 2)


@pytest.mark.parametrize("seed", range(24))
def test_c2t_tree_is_alg1s_with_the_second_pruning_by_confidence(seed):
    # random drafts, random entropies per node and a classifier of P, H and d with random weights (H and d move the
    # confidence as much as P does, so the confidence order is not the P order), β and TopK drawn
    rng = np.random.default_rng(300 + seed)
    K, topk, d_max = int(rng.integers(2, 5)), int(rng.integers(0, 5)), int(rng.integers(2, 5))
    beta = float(rng.choice([0.3, 0.5, 0.7]))
    probs = random_draft(300 + seed)

    def entropy(path):
        return float(np.random.default_rng(zlib.crc32(bytes([7, *path])) + seed).uniform(0.0, 4.0))
    model = linear_classifier(float(rng.uniform(4, 12)), float(rng.uniform(-1.5, 1.5)), float(rng.uniform(-1, 1)),
                              float(rng.uniform(-1, 2)))
    tree = grow_offline(C2T(beta=beta, K=K, d_max=d_max, topk=topk, model=model), synthetic_draft(probs, entropy))
    assert tree_paths(tree) == c2t_reference(probs, entropy, model, beta, K, topk, d_max)


def test_c2t_classifier_names_with_a_plus_round_trip_through_a_spec(tmp_path, monkeypatch):
    from spectree.strategies.c2t import save_classifier

    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    (tmp_path / "data" / "c2t").mkdir(parents=True)
    save_classifier(classifier_of_p(0.1), tmp_path / "data" / "c2t" / "mtbench8+humaneval8.safetensors")
    policy = parse_strategy("c2t:beta=0.4,classifier=mtbench8+humaneval8")
    assert policy.classifier == "mtbench8+humaneval8" and parse_strategy(policy.spec) == policy
    hybrid = parse_strategy("c2t:classifier=mtbench8+humaneval8+lookup:len=4")
    assert hybrid.base.classifier == "mtbench8+humaneval8" and len(hybrid.retrieval) == 1


# --- Gunjur et al. (seed 001 lines ~60–65) -----------------------------------------------------------------------

def test_simple_cutoff_keeps_the_high_entropy_token_as_the_last():
    chain = Chain(k=8, stop="entropy", threshold=1.0)
    assert tree_paths(grow_offline(chain, synthetic_draft(lambda p: [0.6, 0.4], lambda p: 1.5))) == {(0,)}
    h = {(): 0.5, (0,): 0.5, (0, 0): 1.5}
    tree = grow_offline(chain, synthetic_draft(lambda p: [0.6, 0.4], lambda p: h.get(p, 0.5)))
    assert tree_paths(tree) == {(0,), (0, 0), (0, 0, 0)}  # the token drawn at H = 1.5 ends the chain


def test_naive_width_is_the_cutoff_chain_with_top_k_at_its_last_index():
    h = {(): 0.5, (0,): 0.5, (0, 0): 1.5}
    tree = grow_offline(NaiveWidth(k=3, d=8), synthetic_draft(lambda p: [0.5, 0.3, 0.2], lambda p: h.get(p, 0.5)))
    assert tree_paths(tree) == {(0,), (0, 0), (0, 0, 0), (0, 0, 1), (0, 0, 2)}
    short = grow_offline(NaiveWidth(k=3, d=2), synthetic_draft(lambda p: [0.5, 0.3, 0.2], lambda p: 0.1))
    assert tree_paths(short) == {(0,), (0, 0), (0, 1), (0, 2)}  # no high entropy: the last index is depth d


# --- PCT (seed 003 §3.2, Fig. 4's s_d/s_t = 0.1 and leaf cut 0.05) ----------------------------------------------

def test_pct_expands_while_path_confidence_reaches_sd_over_st_and_drops_weak_leaves():
    draft = {(): [0.62, 0.3, 0.08], (0,): [0.5, 0.3, 0.2], (1,): [0.5, 0.5], (0, 0): [0.4, 0.3, 0.3]}
    tree = grow_offline(PCT(ratio=0.1, k=3, d_max=4, leaf_min=0.05),
                        synthetic_draft(lambda p: draft.get(p, [0.2, 0.1, 0.1]), K=3))
    # expanded: P ≥ 0.1 (the root, (0,) .62, (1,) .3, (0, i) .31/.19/.12, (1, i) .15, (0, 0, 0) .12), not (2,) .08;
    # then the leaves below 0.05 go: every child of (0, 1), (0, 2), (1, i) and of (0, 0, 0)
    assert tree_paths(tree) == {(0,), (1,), (2,), (0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (0, 0, 0), (0, 0, 1),
                                (0, 0, 2)}


def test_value_picking_policies_are_not_marked_sampling_safe():
    safe = {spec: parse_strategy(spec).sampling_safe for spec in
            ["dyspec", "dyspec_threshold", "cape", "naive_width", "entropy", "chain:stop=entropy,threshold=1",
             "pct:ratio=0.1,leaf_min=0", "eagle2", "pct:ratio=0.1", "chain:stop=dyjoint,threshold=0.08"]}
    assert safe == {"dyspec": True, "dyspec_threshold": True, "cape": True, "naive_width": True, "entropy": True,
                    "chain:stop=entropy,threshold=1": True, "pct:ratio=0.1,leaf_min=0": True, "eagle2": False,
                    "pct:ratio=0.1": False, "chain:stop=dyjoint,threshold=0.08": False}
