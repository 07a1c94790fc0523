"""Monte-Carlo proof that multi-branch stochastic verification is lossless.

Toy world, vocabulary V = 6: the target T(. | context) and the drafter D(. | context) are fixed functions of
the context tuple (seeded hash -> random logits). D is deliberately unlike T and gives zero probability to
one token per context; at the first position that is the target's second most likely token (about a quarter
of the mass), which only a bonus drawn from the residual can commit.

One decoding step from a context is the real pipeline: `core.policy.grow` with the policy under test, whose offer
calls the real `child_candidates` and `append_offers` as live drafting does (`offer_sampling`: K children per node
sampled without replacement from the warped draft distribution for a sampling-safe policy, the draft's top-K for any
other; the policy's `limit` then passes some), the policy's finalize (pruning included), the tree's draft distributions (`dists`, `dist_row`) as `draft_tree` fills
them, the target's warped distributions at every node (`Sampling.probs`), then the real `verify_multibranch`
(draws by DySpec Alg. 3, top-K children as fixed proposals). Steps repeat until two tokens are committed; the first
two committed tokens must follow the exact target joint T(x1 | c0) T(x2 | c0 + x1). Every registered policy is run
so; controls (a sampled leaf pruned for its value, a child kept for its rank, lossy verifiers) must fail.

Speed: 80k samples of Python-level tree code per k-ary configuration, 20k per registered policy and per control
(the controls fail at p < 1e-6 with 20k). Trees are drafted as a *forest* (one
root per sample, every layer of every tree in one `child_candidates` call, still through the real `grow`), split
into one `DraftTree` per sample, and each tree goes through `verify_multibranch` on its own.
The toy distributions are tabulated once per context (lru_cache; there are only ~1.5k contexts).
"""
from __future__ import annotations

import functools
import time
import zlib
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from spectree.core.drafting import child_candidates, offer_sampling
from spectree.core.offers import append_offers
from spectree.core.policy import NodeTable, Policy, Rows, grow
from spectree.core.sampling import Sampling
from spectree.core.tree import NODE_FIELDS, DraftTree
from spectree.core.verify import Verdict, verify_multibranch
from spectree.strategies import parse_strategy
from spectree.strategies.dyspec import DySpec
from spectree.strategies.gunjur import EntropyBranching
from spectree.strategies.pct import PCT
from spectree.strategies.static import Kary, Sequences
from spectree.strategies.c2t import C2T, C2TClassifier

pytestmark = pytest.mark.slow

V = 6
CTX0 = (0,)  # the committed context before sampling; its last token is the first tree's root
N_SAMPLES = 40_000  # per k-ary configuration (half per other shape)
N_CONTROL = 10_000  # the broken verifiers and policies are caught with a quarter of the samples
N_POLICY = 10_000  # per registered policy: the policy controls fail at this size with p < 1e-6
CHUNK = 20_000  # samples drafted as one forest
P_MIN = 0.01  # a correct verifier must pass the chi-square test at this level
P_CONTROL = 1e-6  # a broken one must fail it at this level

Verifier = Callable[[DraftTree, torch.Tensor, Optional[torch.Generator]], Verdict]


# ---------------------------------------------------------------------------------------------- toy world


def _hash(ctx: tuple[int, ...], salt: int) -> int:
    return zlib.crc32(bytes([salt, *ctx]))


@functools.lru_cache(maxsize=None)
def target_logits(ctx: tuple[int, ...]) -> torch.Tensor:
    return 1.2 * torch.randn(V, generator=torch.Generator().manual_seed(_hash(ctx, 1)))


@functools.lru_cache(maxsize=None)
def draft_probs(ctx: tuple[int, ...]) -> torch.Tensor:
    """Correlated with T but clearly different, and blind to one token per context: the target's second
    most likely token at CTX0 (so a quarter of the first tokens can only come from a residual), a
    hash-chosen token other than the target's favourite elsewhere."""
    noise = torch.randn(V, generator=torch.Generator().manual_seed(_hash(ctx, 2)))
    logits = 0.6 * target_logits(ctx) + 1.0 * noise
    rank = 1 if ctx == CTX0 else 1 + _hash(ctx, 3) % (V - 1)
    logits[int(target_logits(ctx).argsort(descending=True)[rank])] = -torch.inf
    return torch.softmax(logits, -1)


@dataclass
class World:
    """Every context CTX0 + (t1, ..., tm) with m <= max_len - 1, indexed by an integer code."""

    child: torch.Tensor  # [c, V] long: code of ctx + (t,), -1 past max_len
    last: torch.Tensor  # [c] long: last token of the context
    target_logits: torch.Tensor  # [c, V]
    draft_logits: torch.Tensor  # [c, V] log D (-inf where D = 0)

    @staticmethod
    @functools.lru_cache(maxsize=None)
    def build(max_len: int) -> "World":
        contexts, index = [CTX0], {CTX0: 0}
        for ctx in contexts:  # breadth-first; the list grows while we walk it
            if len(ctx) < max_len:
                for t in range(V):
                    index[ctx + (t,)] = len(contexts)
                    contexts.append(ctx + (t,))
        child = torch.tensor([[index.get(ctx + (t,), -1) for t in range(V)] for ctx in contexts])
        return World(child=child, last=torch.tensor([ctx[-1] for ctx in contexts]),
                     target_logits=torch.stack([target_logits(c) for c in contexts]),
                     draft_logits=torch.stack([torch.log(draft_probs(c)) for c in contexts]))


def target_joint(world: World, sampling: Sampling) -> np.ndarray:
    """[V, V] float64: P(x1, x2) = T(x1 | c0) T(x2 | c0 + x1) under the warped target."""
    first = sampling.probs(world.target_logits[0]).double()
    second = sampling.probs(world.target_logits[world.child[0]]).double()  # [V (x1), V (x2)]
    joint = (first[:, None] * second).numpy()
    return joint / joint.sum()


# ------------------------------------------------------------------------------------------ drafting


@dataclass
class Forest:
    """Independent draft trees grown together, re-indexed so that tree j is rows starts[j]:ends[j]."""

    columns: dict[str, torch.Tensor]  # NODE_FIELDS, parents local to each tree
    dists: Optional[torch.Tensor]  # [n, V] warped draft distribution at each node (zero rows at leaves); None:
    # the draft offered its top-K (every child a fixed proposal, as `DraftTree.fixed_proposals` reads it)
    target: torch.Tensor  # [n, V] warped target distribution at each node
    starts: list[int]
    ends: list[int]
    prefix_len: int

    def tree(self, j: int) -> DraftTree:
        s, e = self.starts[j], self.ends[j]
        drawn = self.dists is not None
        return DraftTree(**{f: col[s:e] for f, col in self.columns.items()}, prefix_len=self.prefix_len,
                         dists=self.dists[s:e] if drawn else None, dist_row=torch.arange(e - s) if drawn else None)


def draft_forest(world: World, root_codes: torch.Tensor, prefix_len: int, policy: Policy, sampling: Sampling,
                 generator: Optional[torch.Generator], offers: Optional[Sampling] = None) -> Forest:
    """One draft tree per root context, grown by the real `grow` / `child_candidates` over a table of many trees
    (one root per sample) and kept as the policy finalizes them (pruning included), the draft offering children as
    live drafting does (`offer_sampling`: drawn without replacement for a sampling-safe policy, its top-K for any
    other; `offers` overrides it, for a control). Node i's context is its root's context plus its path's tokens."""
    offers = offer_sampling(policy, sampling) if offers is None else offers
    n_roots = len(root_codes)
    root = DraftTree.root(0, prefix_len)
    table = NodeTable({f: col.repeat(n_roots).numpy() for f, col in root.columns().items()}, np.arange(n_roots), n_roots)
    table.cols["tokens"] = world.last[root_codes].numpy().copy()
    codes = root_codes.clone()  # [rows] context code of every row
    dists = []

    def every_row() -> DraftTree:
        return DraftTree(**{f: torch.from_numpy(c) for f, c in table.cols.items()}, prefix_len=prefix_len)

    def offer(frontier: Rows) -> np.ndarray:
        nonlocal codes
        nodes = torch.from_numpy(frontier.idx)
        logits = world.draft_logits[codes[nodes]]  # [f, V]
        cand, warped = child_candidates(frontier, logits, policy.width(frontier), offers, generator)
        if warped is not None:
            dists.append((nodes, warped))
        rows = append_offers(frontier, policy, cand)  # those the policy's `limit` lets through, as live
        parents, tokens = (torch.from_numpy(table.cols[f][rows]) for f in ("parents", "tokens"))
        codes = torch.cat([codes, world.child[codes[parents], tokens]])
        return rows

    growth = grow(table, policy, offer)
    all_dists = torch.zeros(len(table), V)
    for frontier, warped in dists:
        all_dists[frontier] = warped
    kept = torch.from_numpy(np.flatnonzero(growth.kept))
    forest = every_row().subtree(torch.from_numpy(growth.kept))  # the kept rows of every tree, re-indexed
    all_dists, codes, tree_id = all_dists[kept], codes[kept], torch.from_numpy(table.tree)[kept]

    order = torch.sort(tree_id, stable=True).indices  # a stable regroup by tree (parents precede children)
    counts = torch.bincount(tree_id, minlength=n_roots)
    ends = counts.cumsum(0)
    starts = ends - counts
    local = torch.empty(len(forest), dtype=torch.long)
    local[order] = torch.arange(len(forest)) - starts[tree_id[order]]
    columns = {f: getattr(forest, f)[order] for f in NODE_FIELDS}
    parents = forest.parents[order]
    columns["parents"] = torch.where(parents >= 0, local[parents.clamp(min=0)], parents)
    target = sampling.probs(world.target_logits[codes[order]])
    out = Forest(columns, all_dists[order] if dists else None, target, starts.tolist(), ends.tolist(), prefix_len)
    if dists:  # the draft distributions are recorded only when children are drawn
        check_forest(out, forest, all_dists, policy)
    return out


def check_forest(out: Forest, forest: DraftTree, dists: torch.Tensor, policy: Policy) -> None:
    """Structural invariants the verifier relies on (vectorised over the whole forest)."""
    kid = forest.parents >= 0
    par, tok = forest.parents[kid], forest.tokens[kid]
    assert bool((dists[par, tok] > 0).all()), "a child outside its parent's draft support"
    assert len(torch.unique(par * V + tok)) == len(par), "duplicate sibling tokens (not without replacement)"
    n_kids = torch.bincount(par, minlength=len(forest))
    inner = forest.depth < policy.d_max
    want = torch.minimum(torch.tensor(policy.K), (dists > 0).sum(-1))
    if isinstance(policy, Kary):
        assert torch.equal(n_kids[inner], want[inner]), "an inner node without min(K, support) children"
    else:  # an irregular static shape: never more children than offered
        assert bool((n_kids <= want).all())
    assert int(n_kids[~inner].sum()) == 0 and int(forest.depth.max()) <= policy.d_max
    starts, ends = torch.tensor(out.starts), torch.tensor(out.ends)
    local_index = torch.arange(len(forest)) - starts.repeat_interleave(ends - starts)
    assert bool((out.columns["parents"] < local_index).all()), "tree not re-indexed with parents first"
    assert bool((out.columns["parents"][starts] == -1).all()) and bool((out.columns["depth"][starts] == 0).all())


# ------------------------------------------------------------------------------------------ harness


@dataclass
class Run:
    pairs: np.ndarray  # [N, 2] the first two committed tokens
    first_kids: np.ndarray  # [N, 2] the first two children of the first tree's root, in index order (−1: none)
    second_steps: int  # samples whose first step committed a single token
    accepted: float  # mean accepted draft tokens in the first step
    seconds: float


def sample_pairs(policy: Policy, sampling: Sampling, n: int, seed: int,
                 verifier: Verifier = verify_multibranch) -> Run:
    world = World.build(len(CTX0) + 1 + policy.d_max)
    gen = torch.Generator().manual_seed(seed)
    pairs, first_kids, second, accepted = [], [], 0, 0
    t0 = time.perf_counter()
    for lo in range(0, n, CHUNK):
        m = min(CHUNK, n - lo)
        forest = draft_forest(world, torch.zeros(m, dtype=torch.long), len(CTX0), policy, sampling, gen)
        committed = []
        for j in range(m):
            tree = forest.tree(j)
            verdict = verifier(tree, forest.target[forest.starts[j]:forest.ends[j]], gen)
            committed.append(verdict.new_tokens(tree))
            accepted += len(verdict.accepted)
        root_kids = torch.tensor(forest.starts)[:, None] + torch.tensor([1, 2])  # children of a root come first
        root_kids = root_kids.clamp(max=len(forest.columns["tokens"]) - 1)
        is_kid = (forest.columns["parents"][root_kids] == 0) & (root_kids < torch.tensor(forest.ends)[:, None])
        first_kids.append(torch.where(is_kid, forest.columns["tokens"][root_kids], -1).numpy())  # −1: no such child
        short = [j for j, toks in enumerate(committed) if len(toks) < 2]
        if short:  # a second step from c0 + x1
            x1 = torch.tensor([committed[j][0] for j in short])
            forest2 = draft_forest(world, world.child[0][x1], len(CTX0) + 1, policy, sampling, gen)
            for i, j in enumerate(short):
                tree = forest2.tree(i)
                verdict = verifier(tree, forest2.target[forest2.starts[i]:forest2.ends[i]], gen)
                committed[j] = committed[j] + verdict.new_tokens(tree)
            second += len(short)
        pairs.append(np.array([toks[:2] for toks in committed]))
    return Run(np.concatenate(pairs), np.concatenate(first_kids), second, accepted / n, time.perf_counter() - t0)


def chi2_pvalue(observed: np.ndarray, probs: np.ndarray) -> tuple[float, float, int]:
    """Chi-square goodness of fit; cells with expected count < 5 are pooled (with the smallest other cell
    if the pool itself is < 5). Cells of probability zero must be empty and are left out.
    Returns (statistic, p-value, number of cells tested)."""
    observed, probs = observed.ravel().astype(np.float64), probs.ravel()
    n = observed.sum()
    assert observed[probs == 0].sum() == 0, f"{int(observed[probs == 0].sum())} samples in zero-probability cells"
    observed, expected = observed[probs > 0], n * probs[probs > 0] / probs[probs > 0].sum()
    small = expected < 5
    if small.any():
        pool_o, pool_e = observed[small].sum(), expected[small].sum()
        observed, expected = observed[~small], expected[~small]
        if pool_e < 5:
            i = int(np.argmin(expected))
            pool_o, pool_e = pool_o + observed[i], pool_e + expected[i]
            observed, expected = np.delete(observed, i), np.delete(expected, i)
        observed, expected = np.append(observed, pool_o), np.append(expected, pool_e)
    stat, p = chisquare(observed, expected)
    return float(stat), float(p), len(observed)


def pair_counts(pairs: np.ndarray) -> np.ndarray:
    return np.bincount(pairs[:, 0] * V + pairs[:, 1], minlength=V * V).reshape(V, V)


def without_replacement_pairs(d: np.ndarray) -> np.ndarray:
    """[V, V] P(first = a, second = b) for two draws without replacement from d."""
    rest = np.where(d < 1, 1 - d, np.inf)
    out = d[:, None] * d[None, :] / rest[:, None]
    np.fill_diagonal(out, 0.0)
    return out


# -------------------------------------------------------------------------------------------- tests


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Tiny ops in a Python loop: intra-op threads only contend (10x slower drafting on a busy 2-core box)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


CONFIGS = [
    pytest.param(3, 2, Sampling(temperature=1.0), 1234, id="b3d2-T1"),
    pytest.param(4, 3, Sampling(temperature=0.7, top_p=0.9), 5678, id="b4d3-T0.7-p0.9"),
]


@pytest.mark.parametrize("b,d,sampling,seed", CONFIGS)
def test_multibranch_verification_preserves_target_distribution(b: int, d: int, sampling: Sampling, seed: int
                                                                 ) -> None:
    policy = Kary(b=b, d=d)
    run = sample_pairs(policy, sampling, N_SAMPLES, seed)
    world = World.build(len(CTX0) + 1 + d)
    assert len(run.pairs) == N_SAMPLES
    # the scenario exercises what it should: rejections at the root and a second step
    assert run.second_steps > 0.01 * N_SAMPLES

    stat, p, cells = chi2_pvalue(pair_counts(run.pairs), target_joint(world, sampling))
    # the drafter's children come in sample order (what the verifier replays): first two root children
    d0 = sampling.probs(world.draft_logits[0]).double().numpy()
    kid_stat, kid_p, _ = chi2_pvalue(pair_counts(run.first_kids), without_replacement_pairs(d0))
    print(f"\n[{policy.name} b={b} d={d} T={sampling.temperature} top_p={sampling.top_p}] N={len(run.pairs)} "
          f"chi2={stat:.2f} cells={cells} p={p:.4f} | root-children order chi2={kid_stat:.2f} p={kid_p:.4f} | "
          f"mean accepted={run.accepted:.3f} second steps={run.second_steps} | {run.seconds:.1f}s")
    assert p > P_MIN, f"committed pairs do not follow the target: chi2={stat:.1f}, p={p:.2e}"
    assert kid_p > P_MIN, f"children are not sampled without replacement in order: p={kid_p:.2e}"


def c2t_of_p_and_d() -> C2T:
    """C2T with a made-up classifier F(P, d) that passes likely, shallow nodes (C > 0.5 where 20·P − d > 2)."""
    model = C2TClassifier(features=("P", "d"), hidden=1)
    with torch.no_grad():
        first, _, last = model.net
        first.weight.copy_(torch.tensor([[20.0, -1.0]])), first.bias.fill_(0.0)
        last.weight.fill_(4.0), last.bias.fill_(-8.0)
    return C2T(beta=0.5, K=3, d_max=3, topk=2, model=model.eval())


# one small setting of every registered policy, run at T > 0 as it drafts and finalizes (pruning included): the
# sampling-safe ones on draws without replacement (DySpec Alg. 3), the others on the draft's top-K as fixed proposals
EVERY_POLICY = {
    "chain": lambda: parse_strategy("chain:k=3,stop=entropy,threshold=1.0"),
    "chain (DyMax)": lambda: parse_strategy("chain:k=3,stop=dymax,threshold=0.4"),
    "chain (DyJoint)": lambda: parse_strategy("chain:k=3,stop=dyjoint,threshold=0.2"),
    "vct": lambda: parse_strategy("vct:w=2,d=2"),
    "kary (top b, Gunjur's static tree)": lambda: parse_strategy("kary:b=2,d=2,offer=top"),
    "sequences": lambda: parse_strategy("sequences:k=3,d=2"),
    "sequoia": lambda: parse_strategy("sequoia:n=5,p=0.6/0.2/0.1"),
    "entropy": lambda: EntropyBranching(d=2, k_max=3, branching=lambda h: 2 if h < 1.0 else 3),
    "naive_width": lambda: parse_strategy("naive_width:k=3,d=2"),
    "eagle2": lambda: parse_strategy("eagle2:K=3,d_max=3,N=6"),
    "dyspec": lambda: parse_strategy("dyspec:m=6,K=3,d_max=3"),
    "dyspec (uncapped, m = 12: `limit` cuts the offers)": lambda: parse_strategy("dyspec:m=12,K=12,d_max=3"),
    "dyspec_threshold": lambda: parse_strategy("dyspec_threshold:t=0.1,K=3,d_max=3"),
    "pct": lambda: parse_strategy("pct:ratio=0.0,k=3,d_max=2,leaf_min=0.1"),
    "pct (no leaf removal)": lambda: parse_strategy("pct:ratio=0.2,k=3,d_max=2,leaf_min=0"),
    "cape": lambda: parse_strategy("cape:d=2"),
    "c2t": c2t_of_p_and_d,
    "sglang": lambda: parse_strategy("sglang:steps=2,topk=3,tokens=5"),
    "trtllm": lambda: parse_strategy("trtllm:layers=2,topk=3,tokens=5"),
    "choices": lambda: parse_strategy("choices:paths=0/1/0.0/0.1/1.0"),
}


def test_the_chi_square_harness_covers_every_registered_policy():
    from spectree.strategies import REGISTRY

    names = {make().name for make in EVERY_POLICY.values()}  # k-ary's draws: the configurations above too
    assert names | {"ar"} == set(REGISTRY)
    assert {make().sampling_safe for make in EVERY_POLICY.values()} == {True, False}  # both verification paths


@pytest.mark.parametrize("label", list(EVERY_POLICY))
def test_every_policy_keeps_the_target_distribution_as_it_finalizes(label: str) -> None:
    """Each policy drafts, prunes and is verified as it runs live (`offer_sampling`): its committed pairs follow the
    target's joint at T = 1, whatever its finalize removed."""
    policy, sampling = EVERY_POLICY[label](), Sampling(temperature=1.0)
    run = sample_pairs(policy, sampling, N_POLICY, seed=zlib.crc32(label.encode()) % 10_000)
    stat, p, cells = chi2_pvalue(pair_counts(run.pairs), target_joint(World.build(len(CTX0) + 1 + policy.d_max),
                                                                      sampling))
    how = "top-K, fixed proposals" if offer_sampling(policy, sampling).greedy else "draws, Alg. 3"
    print(f"\n[{policy.spec} ({how})] N={len(run.pairs)} chi2={stat:.2f} cells={cells} p={p:.4f} | "
          f"mean accepted={run.accepted:.3f} | {run.seconds:.1f}s")
    assert run.second_steps > 0.01 * len(run.pairs)
    assert p > P_MIN, f"committed pairs do not follow the target: chi2={stat:.1f}, p={p:.2e}"


def test_dyspec_keeps_the_target_distribution_with_slot_values_of_the_warped_draft() -> None:
    """At T = 0.6 with top-p the children are drawn from the warped draft distribution and DySpec's slot values read
    that distribution's R[y] (Alg. 1, docs/fidelity.md): a slot's value is still known before its token, so the
    tree stays unbiased and the output lossless."""
    warped_dyspec_keeps_the_target("dyspec:m=6,K=3,d_max=3", seed=6060)


def test_uncapped_dyspec_keeps_the_target_distribution_at_t_0_6_with_its_offers_limited() -> None:
    """Uncapped DySpec past a budget of 8 (K = m = 12) at T = 0.6 with top-p: live drafting offers a node's draws only
    while their slots can be among the m best (`DySpec.limit`, on the warped draft's R[y]); the cut reads slot values
    only, so the output keeps the target distribution."""
    warped_dyspec_keeps_the_target("dyspec:m=12,K=12,d_max=3", seed=1212)


def warped_dyspec_keeps_the_target(spec: str, seed: int) -> None:
    """The χ² test of DySpec `spec` at T = 0.6, top-p 0.9: the committed pairs follow the target's distribution."""
    policy, sampling = parse_strategy(spec), Sampling(temperature=0.6, top_p=0.9)
    run = sample_pairs(policy, sampling, N_POLICY, seed=seed)
    stat, p, cells = chi2_pvalue(pair_counts(run.pairs), target_joint(World.build(len(CTX0) + 1 + policy.d_max),
                                                                      sampling))
    print(f"\n[{policy.spec} T=0.6 top_p=0.9] N={len(run.pairs)} chi2={stat:.2f} cells={cells} p={p:.4f}")
    assert p > P_MIN, f"committed pairs do not follow the target: chi2={stat:.1f}, p={p:.2e}"


@dataclass
class DySpecCutByOwnValue(DySpec):
    """Deliberately wrong: an offer limit that also drops a later draw whose own probability is low (p < 0.15): a
    sample dropped for its value, which `limit` must never do."""

    def limit(self, offers: Rows, tree: Rows) -> np.ndarray:
        return super().limit(offers, tree) & ~((offers.draft_prob < 0.15) & (offers.sibling() > 0))


def test_chi_square_harness_catches_an_offer_limit_that_reads_a_draws_own_value() -> None:
    """Control: the harness offers through `append_offers` as live drafting does, so a biased `limit` fails."""
    sampling = Sampling(temperature=1.0)
    policy = DySpecCutByOwnValue(m=12, K=12, d_max=3)
    run = sample_pairs(policy, sampling, N_CONTROL, seed=77)
    stat, p, cells = chi2_pvalue(pair_counts(run.pairs), target_joint(World.build(len(CTX0) + 4), sampling))
    print(f"\n[control: a limit by a draw's own p] N={len(run.pairs)} chi2={stat:.1f} cells={cells} p={p:.3e}")
    assert p < P_CONTROL


@dataclass
class LeafByValueMarkedSafe(PCT):
    """Deliberately wrong: PCT's leaf removal (a leaf dropped for its own joint probability) on sampled children,
    verified as draws without replacement — what PCT marked `sampling_safe` once did."""

    sampling_safe = True


def test_chi_square_harness_catches_a_sampled_leaf_pruned_for_its_value() -> None:
    sampling = Sampling(temperature=1.0)
    policy = LeafByValueMarkedSafe(ratio=0.0, k=3, d_max=2, leaf_min=0.1)
    run = sample_pairs(policy, sampling, N_CONTROL, seed=2024)
    stat, p, cells = chi2_pvalue(pair_counts(run.pairs), target_joint(World.build(len(CTX0) + 3), sampling))
    print(f"\n[control: PCT leaf removal on draws] N={len(run.pairs)} chi2={stat:.1f} cells={cells} p={p:.3e}")
    assert p < P_CONTROL


@dataclass
class SequencesByRank(Sequences):
    """Deliberately wrong: SpecInfer-style sequences that continue with the sampled child whose *value* ranks
    first in its row (the rule `Sequences` once had): a sample kept for its value."""

    features = frozenset({"rank"})

    def width(self, frontier: Rows) -> int:
        return self.k

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        return (cand.depth == 1) | (cand.rank == 0)


def test_chi_square_harness_catches_a_sample_kept_for_its_rank() -> None:
    """Control: keeping a sampled child because its value ranks first in the row biases the commits."""
    sampling = Sampling(temperature=1.0)
    run = sample_pairs(SequencesByRank(k=3, d=2), sampling, N_CONTROL, seed=5432)
    stat, p, cells = chi2_pvalue(pair_counts(run.pairs), target_joint(World.build(len(CTX0) + 3), sampling))
    print(f"\n[control: sequences by rank] N={len(run.pairs)} chi2={stat:.1f} cells={cells} p={p:.3e}")
    assert p < P_CONTROL


def _kids(tree: DraftTree) -> list[list[int]]:
    kids: list[list[int]] = [[] for _ in range(len(tree))]
    for i, p in enumerate(tree.parents.tolist()):
        if p >= 0:
            kids[p].append(i)
    return kids


def accept_every_drafted_child(tree: DraftTree, target_probs: torch.Tensor,
                               generator: Optional[torch.Generator] = None) -> Verdict:
    """Deliberately wrong: follow the first child with draft probability > 0 (plain draft sampling)."""
    kids, tokens, node, accepted = _kids(tree), tree.tokens.tolist(), 0, []
    while True:
        nxt = next((c for c in kids[node] if tree.draft_dist(node)[tokens[c]] > 0), None)
        if nxt is None:
            bonus = int(torch.multinomial(target_probs[node].float(), 1, generator=generator))
            return Verdict(accepted, bonus, len(tree))
        accepted.append(nxt)
        node = nxt


def verify_as_if_with_replacement(tree: DraftTree, target_probs: torch.Tensor,
                                  generator: Optional[torch.Generator] = None) -> Verdict:
    """Deliberately wrong for children drawn without replacement: SpecInfer's rule for i.i.d. children,
    i.e. `verify_multibranch` without the D[y] <- 0, D <- norm(D) update after a rejection."""
    kids, tokens, node, accepted = _kids(tree), tree.tokens.tolist(), 0, []
    while True:
        R, D, nxt = target_probs[node].double(), tree.draft_dist(node).double(), None
        for c in kids[node]:
            y = tokens[c]
            if float(torch.rand((), generator=generator, dtype=torch.float64)) * D[y] < R[y]:
                nxt = c
                break
            residual = (R - D).clamp_min(0.0)
            if residual.sum() > 0:
                R = residual / residual.sum()
        if nxt is None:
            bonus = int(torch.multinomial(R.float(), 1, generator=generator))
            return Verdict(accepted, bonus, len(tree))
        accepted.append(nxt)
        node = nxt


@pytest.mark.parametrize("verifier", [accept_every_drafted_child, verify_as_if_with_replacement],
                         ids=["draft-sampling", "with-replacement-rule"])
def test_chi_square_harness_catches_a_lossy_verifier(verifier: Verifier) -> None:
    """Control: the same harness with a lossy verifier (b=3, d=2, T=1) must fail hard, at a tenth of the samples."""
    sampling = Sampling(temperature=1.0)
    run = sample_pairs(Kary(b=3, d=2), sampling, N_CONTROL, seed=4321, verifier=verifier)
    observed = pair_counts(run.pairs)
    world = World.build(len(CTX0) + 3)
    joint = target_joint(world, sampling)
    if verifier is accept_every_drafted_child:
        # the drafter never proposes the target's second most likely first token: drafts alone never commit it
        blind = (sampling.probs(world.draft_logits[0]) == 0).numpy()
        assert joint[blind].sum() > 0.2 and observed[blind].sum() == 0
    stat, p, cells = chi2_pvalue(observed, joint)
    print(f"\n[control: {verifier.__name__}] N={len(run.pairs)} chi2={stat:.1f} cells={cells} p={p:.3e} "
          f"| {run.seconds:.1f}s")
    assert p < P_CONTROL




def verify_leaving_fixed_in_the_residual(tree: DraftTree, target_probs: torch.Tensor,
                                         generator: Optional[torch.Generator] = None) -> Verdict:
    """Deliberately wrong: `verify_multibranch` whose retrieval children, once rejected, stay in the residual
    (the bonus can draw a token its test just turned down)."""
    kids, tokens, fixed, node, accepted = _kids(tree), tree.tokens.tolist(), (tree.source > 0).tolist(), 0, []
    while True:
        R, nxt = target_probs[node].double(), None
        D = tree.draft_dist(node).double() if any(not fixed[c] for c in kids[node]) else None
        for c in kids[node]:
            y, u = tokens[c], float(torch.rand((), generator=generator, dtype=torch.float64))
            if fixed[c]:
                if u < R[y]:
                    nxt = c
                    break
                continue
            if D[y] > 0 and u * D[y] < R[y]:
                nxt = c
                break
            R = (R - D).clamp_min(0.0)
            R, D[y] = R / R.sum(), 0.0
            D = D / D.sum() if D.sum() > 0 else D
        if nxt is None:
            return Verdict(accepted, int(torch.multinomial(R.float(), 1, generator=generator)), len(tree))
        accepted.append(nxt)
        node = nxt


def grafting_verifier(world: World, sampling: Sampling, verifier: Verifier = verify_multibranch) -> Verifier:
    """`verifier` on the drafted tree with two retrieval branches grafted (`retrieval.graft`), proposed from the
    root's context alone, as a suffix index would: the target's second likeliest token (which the draft never
    samples at CTX0: always a new node) and the draft's likeliest (often a sampled child already: merged), each
    followed by the target's likeliest token after it. The target is scored at every node, grafted ones too."""
    from spectree.retrieval.graft import graft
    from spectree.retrieval.proposers import Branch

    def graft_and_verify(tree: DraftTree, target_probs: torch.Tensor, generator: Optional[torch.Generator]) -> Verdict:
        root = 0 if tree.prefix_len == len(CTX0) else int(world.child[0, int(tree.tokens[0])])
        branches = []
        for first in (int(world.target_logits[root].argsort(descending=True)[1]), int(world.draft_logits[root].argmax())):
            second = int(world.target_logits[world.child[root, first]].argmax())
            branches.append(Branch([first, second], [1.0, 1.0], [1, 2]))
        tree = graft(tree, [(1, branches)])
        codes = [root]
        for p, t in zip(tree.parents.tolist()[1:], tree.tokens.tolist()[1:]):
            codes.append(int(world.child[codes[p], t]))
        return verifier(tree, sampling.probs(world.target_logits[codes]), generator)

    return graft_and_verify


@pytest.mark.parametrize("verifier,n,seed", [
    pytest.param(verify_multibranch, N_SAMPLES // 2, 8642, id="point-mass rule"),
    pytest.param(verify_leaving_fixed_in_the_residual, N_CONTROL, 9753, id="control: leaky residual")])
def test_multibranch_verification_with_retrieval_branches(verifier: Verifier, n: int, seed: int) -> None:
    """A tree with fixed (retrieval) branches next to sampled children: each fixed child is a point-mass proposal,
    accepted with R[y] and else removed from the residual, so the committed pairs follow the target (second
    tokens too: under a retrieval node every child is fixed). Control: a residual that keeps a rejected fixed
    token biases the commits."""
    policy, sampling = Kary(b=3, d=2), Sampling(temperature=0.8)
    world = World.build(len(CTX0) + 1 + policy.d_max)
    run = sample_pairs(policy, sampling, n, seed, grafting_verifier(world, sampling, verifier))
    stat, p, cells = chi2_pvalue(pair_counts(run.pairs), target_joint(world, sampling))
    print(f"\n[kary b=3 d=2 + 2 retrieval branches, T=0.8, {verifier.__name__}] N={len(run.pairs)} "
          f"chi2={stat:.2f} cells={cells} p={p:.4g} | mean accepted={run.accepted:.3f} | {run.seconds:.1f}s")
    assert run.accepted > 1.0  # the grafted depth-2 nodes get accepted
    if verifier is verify_multibranch:
        assert p > P_MIN, f"committed pairs do not follow the target: chi2={stat:.1f}, p={p:.2e}"
    else:
        assert p < P_CONTROL
