"""Tree policies: their rules on hand-made candidates, greedy losslessness and replay = live on a tiny model."""
import numpy as np
import pytest
import torch
from helpers import POLICY_SPECS, expand_on, finalize_on, grow_offline, select_on, tiny_llama

from spectree.core.decode import speculative_generate
from spectree.core.policy import FEATURE_COLUMNS, OPTIONAL_FEATURES, Growth, Lazy, NodeTable, Rows, computed_columns
from spectree.core.errors import SpectreeError
from spectree.core.tree import DraftTree, Nodes
from spectree.prompts import Prompt
from spectree.replay.logbook import LogConfig, log_prompt
from spectree.replay.replay import replay
from spectree.strategies import REGISTRY, parse_strategy
from spectree.strategies.gunjur import gunjur_branching

SPECS = POLICY_SPECS


def candidates(parent_entropy: float, probs: list[float], confidence: float = 0.5) -> Nodes:
    n = len(probs)
    p = torch.tensor(probs)
    return Nodes(tokens=torch.arange(n), parents=torch.zeros(n, dtype=torch.long), depth=torch.ones(n, dtype=torch.long),
                 draft_prob=p, joint=p.clone(), entropy=torch.full((n,), parent_entropy),
                 entropy_topm=torch.full((n,), parent_entropy), rank=torch.arange(n),
                 confidence=torch.full((n,), confidence))


@pytest.mark.parametrize("h, width", [(0.0, 1), (0.019, 1), (0.02, 2), (0.99, 2), (1.0, 4), (1.3, 6), (1.6, 7), (5.0, 7)])
def test_gunjur_branching_factor(h, width):
    assert gunjur_branching(h) == width


def test_entropy_policy_keeps_b_of_h_children():
    policy = parse_strategy("entropy")
    keep = select_on(policy, candidates(1.3, [0.3, 0.2, 0.1, 0.1, 0.1, 0.1, 0.05]))
    assert keep.tolist() == [True] * 6 + [False]


@pytest.mark.parametrize("conf, width", [(0.2, 7), (0.3, 7), (0.31, 5), (0.5, 5), (0.6, 5), (0.61, 3), (0.7, 3),
                                         (0.8, 3), (0.81, 1), (0.95, 1)])  # EDD: (0, .3], (.3, .6], (.6, .8], (.8, 1]
def test_cape_width_follows_parent_confidence(conf, width):
    keep = select_on(parse_strategy("cape"), candidates(1.0, [0.1] * 7, conf))
    assert int(keep.sum()) == width


def test_eagle2_drafts_every_offer_expands_top_k_per_layer_and_reranks_to_n():
    policy = parse_strategy("eagle2:K=2,d_max=3,N=3")  # N = 3 tokens verified: the root and 2 drafts
    assert select_on(policy, candidates(1.0, [0.5, 0.1, 0.3])).tolist() == [True, True, True]
    layer = DraftTree.root(0, 5)
    new = layer.add(candidates(1.0, [0.5, 0.1, 0.3]))
    assert expand_on(policy, layer, new).tolist() == [True, False, True]
    tree = DraftTree.root(0, 5)
    tree.add(candidates(1.0, [0.5, 0.3]))
    deep = candidates(1.0, [0.4])
    deep.parents, deep.depth, deep.joint = torch.tensor([1]), torch.tensor([2]), torch.tensor([0.2])
    tree.add(deep)
    assert tree.subtree(torch.from_numpy(finalize_on(policy, tree))).joint.tolist() == pytest.approx([1.0, 0.5, 0.3])


def test_pct_stops_expanding_below_sd_over_st_and_drops_weak_leaves():
    policy = parse_strategy("pct:ratio=0.25,leaf_min=0.05")
    tree = DraftTree.root(0, 5)
    new = tree.add(candidates(1.0, [0.6, 0.2, 0.03]))
    assert expand_on(policy, tree, new).tolist() == [True, False, False]
    assert finalize_on(policy, tree).tolist() == [True, True, True, False]


def test_dyspec_budget_keeps_exactly_the_m_most_valuable_nodes():
    policy = parse_strategy("dyspec:m=2,K=3,d_max=2")
    tree = DraftTree.root(0, 5)
    tree.add(candidates(1.0, [0.6, 0.3, 0.1]))
    assert finalize_on(policy, tree).tolist() == [True, True, True, False]


def test_dyspec_keeps_no_node_of_value_zero_even_under_budget():
    # a sharp draft (the GPU checklist's random heads): one child takes all the probability, the others underflow to
    # 0; with fewer than m positive values the m-th best is 0, and every zero-valued tie would pass (the first H100
    # run: 4,096 candidates offered at the 8B shape until the node guard stopped the tree)
    policy = parse_strategy("dyspec:m=8,K=4,d_max=3")
    assert select_on(policy, candidates(0.0, [1.0, 0.0, 0.0, 0.0])).tolist() == [True, False, False, False]


@pytest.mark.parametrize("spec", ["pct:ratio=1.5", "dyspec_threshold:t=-0.1", "eagle2:N=-3", "cape:d=-1"])
def test_out_of_range_policy_parameters_are_refused(spec):
    with pytest.raises(SpectreeError):
        parse_strategy(spec)


def test_every_registered_policy_is_exercised():
    assert {s.partition(":")[0] for s in SPECS} | {"ar", "c2t"} == set(REGISTRY)


@pytest.fixture(scope="module")
def weak_draft():
    return tiny_llama(seed=1, layers=1)


@pytest.mark.parametrize("spec", SPECS)
def test_greedy_decoding_is_lossless_for_every_policy(spec, tiny_target, weak_draft):
    ids = [2, 40, 41, 42, 7]
    with torch.inference_mode():
        ref = tiny_target.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False, eos_token_id=None,
                                   pad_token_id=0)[0, len(ids):].tolist()
    for draft in (weak_draft, tiny_target):
        assert speculative_generate(tiny_target, draft, ids, parse_strategy(spec), 24).tokens == ref


class FixedPrompt:
    """Stands in for a tokenizer's chat template: the tiny model has no tokenizer."""

    def apply_chat_template(self, messages, add_generation_prompt=True):
        return [3, 14, 15, 92, 65]


def test_replay_equals_live_for_every_policy(tiny_target, weak_draft):
    cfg = LogConfig(max_new_tokens=20, K=7, d_max=4, beam=400)  # every node below depth 4 expanded
    logged = log_prompt(tiny_target, weak_draft, FixedPrompt(), Prompt("toy", "0", "toy", "x"), cfg, eos_ids=())
    for spec in SPECS:
        policy = parse_strategy(spec)
        live = speculative_generate(tiny_target, weak_draft, FixedPrompt().apply_chat_template([]), policy, 20)
        steps = replay([logged], policy)
        assert steps.tau.tolist() == [s.tau for s in live.steps], spec
        assert steps.gamma.tolist() == [s.gamma for s in live.steps], spec
    with pytest.raises(SpectreeError, match="log with larger"):
        replay([logged], parse_strategy("kary:b=8,d=2"))


@pytest.mark.parametrize("spec, kept, expanded", [("chain:stop=entropy,threshold=1.0", True, False),
                                                  ("chain:stop=dymax,threshold=0.3", True, True),
                                                  ("chain:stop=dyjoint,threshold=0.6", False, True),
                                                  ("chain", True, True)])
def test_chain_early_stopping_rules(spec, kept, expanded):
    cand = candidates(1.3, [0.5], confidence=0.5)  # parent entropy 1.3, max prob 0.5, joint 0.5
    assert select_on(parse_strategy(spec), cand).tolist() == [kept]
    tree = DraftTree.root(0, 5)
    assert expand_on(parse_strategy(spec), tree, tree.add(cand)).tolist() == [expanded]  # the cutoff's last token


def test_sequences_branch_only_at_the_root():
    policy = parse_strategy("sequences:k=3,d=4")
    assert select_on(policy, candidates(1.0, [0.5, 0.3, 0.2])).tolist() == [True] * 3
    deeper = candidates(1.0, [0.5, 0.3, 0.2])
    deeper.depth = torch.full((3,), 2)
    assert select_on(policy, deeper).tolist() == [True, False, False]


def brute_force_best(p, n):
    """Every tree of n nodes by recursion over the root's children sizes (tiny n only)."""
    from itertools import product

    def trees(size):
        if size == 1:
            return [1.0]
        best = []
        for k in range(1, min(len(p), size - 1) + 1):
            for sizes in product(range(1, size), repeat=k):
                if sum(sizes) == size - 1:
                    best.append(1.0 + sum(p[i] * max(trees(s)) for i, s in enumerate(sizes)))
        return best
    return max(trees(n))


@pytest.mark.parametrize("p, n", [([0.5, 0.2], 4), ([0.9], 4), ([0.6, 0.3, 0.1], 6), ([0.4, 0.4, 0.1], 5)])
def test_sequoia_dp_matches_brute_force(p, n):
    from spectree.strategies.sequoia import sequoia_tree

    value, paths = sequoia_tree(p, n)
    assert value == pytest.approx(brute_force_best(p, n)) and len(paths) == n - 1


def test_acceptance_vector_from_a_logbook(tiny_target):
    from spectree.strategies.sequoia import acceptance_vector

    cfg = LogConfig(max_new_tokens=12, K=3, d_max=3, beam=3)
    perfect = log_prompt(tiny_target, tiny_target, FixedPrompt(), Prompt("toy", "0", "toy", "x"), cfg, eos_ids=())
    assert acceptance_vector([perfect], 3) == [1.0, 0.0, 0.0]  # draft = target: the top-1 is always right


def test_dyn_depth_stops_high_entropy_branches_and_naive_width_branches_last():
    assert not select_on(parse_strategy("entropy:cutoff=2.0"), candidates(2.5, [0.3, 0.2])).any()
    policy = parse_strategy("naive_width:k=3,d=2")
    assert select_on(policy, candidates(1.0, [0.5, 0.3, 0.2])).tolist() == [True, False, False]
    last = candidates(1.0, [0.5, 0.3, 0.2])
    last.depth = torch.full((3,), 2)
    assert select_on(policy, last).tolist() == [True, True, True]


def test_unknown_chain_stop_rule_is_refused():
    with pytest.raises(SpectreeError, match="unknown stop rule"):
        parse_strategy("chain:stop=sometimes")
    with pytest.raises(SpectreeError, match="kary: offer must be 'draws' or 'top'"):
        parse_strategy("kary:b=2,offer=best")


@pytest.mark.parametrize("spec, message", [("chain:k=abc", "k must be a whole number"),
                                            ("chain:k=2.5", "k must be a whole number"),
                                            ("dyspec:m=1e9", "m must be a whole number"),
                                            ("dyspec_threshold:t=nan", "t must be a number"),
                                            ("pct:ratio=x", "ratio must be a number"),
                                            ("chain:k=2,k=5", "gives k twice"),
                                            ("kary:depth=3", r"has no parameter\(s\) \['depth'\]")])
def test_malformed_parameters_are_refused_with_the_name_the_user_typed(spec, message):
    with pytest.raises(SpectreeError, match=message):
        parse_strategy(spec)


def test_c2t_beta_is_checked_before_the_classifier_loads():
    with pytest.raises(SpectreeError, match="beta must be in"):
        parse_strategy("c2t:beta=1.2")
    with pytest.raises(SpectreeError, match="classifier .* is missing"):
        parse_strategy("c2t:beta=0.5,classifier=no-such-classifier")


def test_classifier_learns_acceptance_and_c2t_prunes_by_beta_and_topk(tiny_target, weak_draft, tmp_path):
    from spectree.strategies.c2t import (C2T, ClassifierTraining, load_classifier, node_table, save_classifier,
                                         train_classifier)

    cfg = LogConfig(max_new_tokens=20, K=7, d_max=4, beam=400)
    logged = log_prompt(tiny_target, tiny_target, FixedPrompt(), Prompt("toy", "0", "toy", "x"), cfg, eos_ids=())
    table = node_table([logged])
    model, history = train_classifier(table, table, ClassifierTraining(epochs=5))
    chosen = model.confidence(table) > 0.5
    on_path = torch.tensor(table.on_path.to_numpy())
    assert len(history) == 5  # the kept epoch is the one C2T's rule picks: best recall, then least positive rate
    assert float((chosen & on_path).sum() / on_path.sum()) == pytest.approx(float(history[history.chosen].recall.iloc[0]))
    save_classifier(model, tmp_path / "c.safetensors", card={"epochs": 5})
    model = load_classifier(tmp_path / "c.safetensors")
    conf = model.confidence(logged.tree(0))
    assert conf.shape == (len(logged.tree(0)),) and bool(((conf >= 0) & (conf <= 1)).all())
    cand = candidates(1.0, [0.5, 0.3, 0.1, 0.05])
    strict = select_on(C2T(K=4, d_max=3, topk=0, model=model, beta=0.999999), cand)
    loose = select_on(C2T(K=4, d_max=3, model=model, beta=0.0, topk=2), cand)
    assert int(strict.sum()) <= int(loose.sum()) == 2
    c2t = C2T(K=3, d_max=4, topk=0, model=model, beta=0.2)
    ids = FixedPrompt().apply_chat_template([])
    live = speculative_generate(tiny_target, weak_draft, ids, c2t, 20)
    with torch.inference_mode():
        ref = tiny_target.generate(torch.tensor([ids]), max_new_tokens=20, do_sample=False, eos_token_id=None,
                                   pad_token_id=0)[0, len(ids):].tolist()
    assert live.tokens == ref
    weak_log = log_prompt(tiny_target, weak_draft, FixedPrompt(), Prompt("toy", "0", "toy", "x"), cfg, eos_ids=())
    assert replay([weak_log], c2t).tau.tolist() == [s.tau for s in live.steps]


def test_c2t_features_read_the_top_1000_entropy_not_the_full_vocabulary_one():
    """C2T's H is the top-1000 entropy of the distribution a node was drawn from ("H_i ← −Σ_{S1000(i−1)}" s0 l.142,
    renormalised here: `FEATURES`, `topm_entropy`), not the full vocabulary's (`entropy`). A root whose distribution
    is one head token over a long flat tail (20,000 tokens) has H ≈ 0.48 nats over its top 1,000 and ≈ 5.4 over the
    vocabulary; a classifier confident exactly where H < 2 keeps its children in live drafting and in replay, and
    the training path's feature matrix holds the top-1000 entropy. A classifier fed `entropy` drops them all."""
    from types import SimpleNamespace

    import pandas as pd

    from spectree.core.drafting import TOP_M, draft_tree
    from spectree.core.sampling import Sampling
    from spectree.replay.forest import Forest
    from spectree.replay.logbook import LoggedPrompt
    from spectree.replay.logtree import LogTree
    from spectree.replay.replay import grow_forest
    from spectree.strategies.c2t import C2T, C2TClassifier, node_table

    V, k = 20_000, 3
    logits = torch.zeros(V)
    logits[0] = 10.0  # one head token over a flat tail
    z = logits.double().numpy()
    p = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    full = float(-(p * np.log(p)).sum())  # ≈ 5.4 nats over the vocabulary
    top = np.sort(z)[::-1][:TOP_M]
    q = np.exp(top - top.max()) / np.exp(top - top.max()).sum()
    topm = float(-(q * np.log(q)).sum())  # ≈ 0.48 nats over the renormalised top 1,000
    assert TOP_M == 1000 and full > topm + 4

    model = C2TClassifier(("P", "H", "d"), hidden=1)  # C = sigmoid(4 · (2 − H)): confident iff H < 2 nats
    with torch.no_grad():
        model.net[0].weight.copy_(torch.tensor([[0.0, 1.0, 0.0]]))
        model.net[0].bias.zero_()
        model.net[2].weight.copy_(torch.tensor([[-4.0]]))
        model.net[2].bias.copy_(torch.tensor([8.0]))
    model.eval()
    c2t = C2T(beta=0.5, K=k, d_max=1, topk=0, classifier="hand-made", model=model)
    drafter = SimpleNamespace(kept_ids=None, rollback=lambda: None)  # depth 1: the root's logits only, no forward

    live = draft_tree(drafter, 7, logits, 5, c2t, Sampling())  # live drafting computes only C2T's features
    assert len(live) == 1 + k, "live drafting dropped the children: C2T read an entropy other than the top-1000 one"
    assert np.allclose(live.entropy_topm.numpy()[1:], topm, atol=1e-3)

    logged = draft_tree(drafter, 7, logits, 5, LogTree(K=k, d_max=1, beam=k), Sampling())  # every feature, as logged
    cols = {f: t.numpy() for f, t in logged.columns().items()}
    nodes = pd.DataFrame({"position": 0, "node": range(len(logged)), **cols,
                          "on_path": np.arange(len(logged)) < 2, "target_prob": np.nan})
    lp = LoggedPrompt(Prompt("toy", "0", "toy", "x"), 5, [int(cols["tokens"][1])], 1, nodes, k, 1)
    assert np.allclose(nodes.entropy[1:], full, atol=1e-3) and np.allclose(nodes.entropy_topm[1:], topm, atol=1e-3)

    kept = grow_forest(Forest.of([lp]), c2t).kept  # replay
    assert kept.tolist() == [True] * (1 + k), "replay dropped the children: C2T read the full-vocabulary entropy"

    table = node_table([lp])  # what `fit_and_save` trains on; `train_classifier` feeds it `inputs`
    x = model.inputs(table).numpy()  # [n, (P, H, d)]
    assert np.allclose(x[:, 1], topm, atol=1e-3) and np.allclose(x[:, [0, 2]], table[["joint", "depth"]].to_numpy())
    conf = model.confidence(table).numpy()
    assert (conf > 0.99).all() and np.allclose(conf, torch.sigmoid(model(torch.from_numpy(x))).detach().numpy(), atol=1e-6)


def test_vct_shape_and_sibling_order():
    from spectree.core.groups import sibling_order

    policy = parse_strategy("vct:w=3,d=5")
    assert (policy.name, policy.K, policy.d_max) == ("vct", 3, 5)
    assert sibling_order(np.array([0, 0, 0, 3, 3, 5])).tolist() == [0, 1, 2, 0, 1, 0]


def feature_offer(blank: frozenset):
    """Seeded random candidates (4 per frontier node) whose optional features named in `blank` are blanked
    (NaN, rank -1), as `NodeTable.node_fields` fills what live drafting does not compute."""
    def offer(tree: DraftTree, frontier: torch.Tensor) -> Nodes:
        g = torch.Generator().manual_seed(1000 * len(tree) + int(frontier.sum()))
        f, k = len(frontier), 4
        p = torch.rand(f, k, generator=g).sort(-1, descending=True).values  # [f, k]
        parents = frontier[:, None].expand(f, k)
        per_row = {name: (torch.rand(f, generator=g) * 3)[:, None].expand(f, k) for name in ("entropy", "entropy_topm")}
        cols = dict(entropy=per_row["entropy"], entropy_topm=per_row["entropy_topm"], rank=torch.arange(k).expand(f, k))
        cols.update(draft_prob=p, joint=tree.joint[parents] * p, confidence=p[:, :1].expand(f, k))
        for name in (c for feature in blank for c in FEATURE_COLUMNS[feature]):
            cols[name] = torch.full_like(cols[name], -1 if name == "rank" else float("nan"))
        return Nodes(tokens=torch.randint(0, 50, (f, k), generator=g).flatten(), parents=parents.flatten(),
                     depth=(tree.depth[parents] + 1).flatten(), **{name: col.flatten() for name, col in cols.items()})
    return offer


@pytest.mark.parametrize("spec", SPECS + ["c2t:beta=0.3,K=4,d_max=4"])
def test_policies_read_only_the_optional_features_they_declare(spec):
    """Live drafting skips the optional features a policy does not declare; the tree must not change."""
    def grown(blank):
        return grow_offline(parse_strategy(spec), feature_offer(blank))

    full, lean = grown(frozenset()), grown(OPTIONAL_FEATURES - parse_strategy(spec).features)
    assert full.tokens.tolist() == lean.tokens.tolist() and full.parents.tolist() == lean.parents.tolist()
    assert len(full) > 1


def test_reading_a_feature_live_drafting_did_not_compute_is_an_error():
    """Live drafting's table holds only the declared features' columns: reading another fails loudly, never NaN."""
    root = DraftTree.root(0, 5).columns()
    table = NodeTable({f: root[f].numpy() for f in computed_columns(frozenset(), greedy=True)}, np.zeros(1, int), 1)
    rows = Rows(Growth(table, grown=np.ones(1, dtype=bool)), np.array([0]))
    assert rows.depth.tolist() == [0] and rows.rank.tolist() == [0]  # greedy ranks are free
    with pytest.raises(SpectreeError, match="'draft_prob' in its `features`"):
        rows.joint
    with pytest.raises(SpectreeError, match="'entropy' in its `features`"):
        rows.entropy
    assert "rank" not in computed_columns(frozenset(), greedy=False)  # a sampled token's rank costs a pass


def test_a_lazy_column_is_computed_only_where_read_and_equals_the_eager_one():
    """C2T's top-M entropy is a `Lazy` column when drafting live: computed at the rows a policy reads (and at the
    rows a tree exports), with the values an eager pass over every row gives, so replay still equals live."""
    from spectree.core.drafting import TOP_M, child_candidates
    from spectree.core.sampling import Sampling, topm_entropy
    from spectree.core.tree import root_columns

    logits = torch.randn(3, 4 * TOP_M, generator=torch.Generator().manual_seed(0)) * 3  # [f=3, V]
    table = NodeTable(root_columns(7, computed_columns(frozenset({"entropy_topm"}), greedy=True)), np.zeros(1, int), 1)
    frontier = Rows(Growth(table, grown=np.ones(1, dtype=bool)), np.zeros(3, dtype=np.int64))  # the root, thrice
    cols, _ = child_candidates(frontier, logits, 2, Sampling(), None, frozenset({"entropy_topm"}))
    lazy = cols["entropy_topm"]
    assert isinstance(lazy, Lazy)
    asked = []
    cols["entropy_topm"] = Lazy(lambda off: asked.append(off.tolist()) or lazy.fn(off))
    rows = table.append(cols)  # [6]: two children of each frontier row
    growth = Growth(table, grown=np.ones(len(table), dtype=bool))
    read = Rows(growth, rows).subset(np.array([False, False, True, True, False, False]))  # row 1's children
    eager = topm_entropy(logits, TOP_M).numpy()  # [3]
    assert np.allclose(read.entropy_topm, eager[[1, 1]]) and asked == [[2, 3]]
    again = Rows(growth, rows[2:4]).entropy_topm  # computed once
    assert np.allclose(again, eager[[1, 1]]) and asked == [[2, 3]]
    fields = table.node_fields(rows)  # exporting the rows computes the rest
    assert np.allclose(fields["entropy_topm"], eager.repeat(2)) and asked == [[2, 3], [0, 1, 4, 5]]


def test_a_drawn_childs_p_is_of_the_distribution_it_was_drawn_from():
    """DySpec's Alg. 1 values a slot with the R[y] it draws y from (s2 l.147–149; its draft at T 0.6, l.192): at
    T = 0.6 a root of raw p [0.48, 0.32, 0.20] draws from [0.574, 0.292, 0.133], so after t0 its child slot (0.574)
    beats the next sibling slot (0.426) — by raw p it would lose (0.48 against 0.52). Entropy and confidence stay
    the raw distribution's (what Gunjur's B(H) and CAPE read)."""
    from spectree.core.drafting import child_candidates
    from spectree.core.sampling import Sampling
    from spectree.core.tree import root_columns

    raw = torch.tensor([0.48, 0.32, 0.20])
    logits, features = torch.log(raw)[None], frozenset({"draft_prob", "entropy"})  # [f=1, V=3]
    warped = torch.softmax(logits[0] / 0.6, -1)  # [V]
    first_drawn = set()
    for seed in range(12):
        table = NodeTable(root_columns(7, computed_columns(features, greedy=False)), np.zeros(1, int), 1)
        frontier = Rows(Growth(table, grown=np.ones(1, dtype=bool)), np.zeros(1, dtype=np.int64))
        cols, _ = child_candidates(frontier, logits, 3, Sampling(temperature=0.6), torch.Generator().manual_seed(seed),
                                   features)
        tok = torch.from_numpy(cols["tokens"])
        assert np.allclose(cols["draft_prob"], warped[tok]) and np.allclose(cols["joint"], cols["draft_prob"])
        assert np.allclose(cols["confidence"], 0.48) and np.allclose(cols["entropy"], -(raw * raw.log()).sum())
        rows = Rows(Growth(table, grown=np.ones(4, dtype=bool)), table.append(cols))
        slots = rows.slot_value()  # [3] the slots the draws went into: 1, 1 − R[y1], 1 − R[y1] − R[y2]
        assert np.allclose(slots, 1 - np.concatenate([[0], np.cumsum(warped[tok].numpy())[:-1]]), atol=1e-6)
        first_drawn.add(int(tok[0]))
        if tok[0] == 0:  # the paper's chain: t0's child slot outranks its next sibling's
            assert rows.joint[0] > slots[1]
    assert 0 in first_drawn
