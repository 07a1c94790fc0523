"""Retrieval drafts: the suffix index, the proposers, grafting, hybrid specs, greedy losslessness of every policy
family with each proposer, and replay = live for hybrid trees (tiny models; the χ² test for a tree with retrieval
branches is in tests/core/test_stochastic_verification.py)."""
import numpy as np
import pytest
import torch
from helpers import POLICY_SPECS, make_tree, tiny_llama

from spectree.core.decode import speculative_generate
from spectree.core.errors import SpectreeError
from spectree.prompts import Prompt
from spectree.replay.logbook import LogConfig, log_prompt
from spectree.replay.replay import replay
from spectree.retrieval.graft import graft, proposals
from spectree.retrieval.index import ContextIndex
from spectree.retrieval.proposers import HF_RULE, Branch, Lookup, Suffix, trimmed
from spectree.retrieval.walk import walk
from spectree.strategies import parse_strategy
from spectree.strategies.hybrid import Hybrid

TEXT = [5, 6, 7, 8, 5, 6, 9, 5, 6, 7, 1, 2, 5, 6]  # "5 6" is followed by 7, 9, 7, then the text ends in "5 6"


def test_the_index_counts_next_tokens_and_remembers_their_latest_position():
    index = ContextIndex(3, TEXT)
    assert index.counts[(5, 6)] == {7: 2, 9: 1} and index.seen[(5, 6)] == 3
    assert index.last[(5, 6)] == 9  # the 7 after the third "5 6"
    assert index.match(TEXT, 1) == (2, (5, 6))  # "7 5 6" / "2 5 6" never occurred followed by a token
    assert index.match([0, 0], 1) == (0, None)
    assert index.probability((5, 6), 7) == pytest.approx(2 / 3)


def test_the_index_grows_incrementally_as_it_does_at_once():
    step = ContextIndex(4)
    for i in range(0, len(TEXT), 3):
        step.extend(TEXT[i:i + 3])
    once = ContextIndex(4, TEXT)
    assert (step.text, step.counts, step.seen, step.last, step.first) == (once.text, once.counts, once.seen, once.last,
                                                                       once.first)


def test_prompt_lookup_copies_what_followed_the_latest_match():
    branch, = Lookup(len=3, n=3, min_n=2, occurrence="latest").propose(ContextIndex(3, TEXT))
    assert branch.tokens == [7, 1, 2]
    assert Lookup(n=3, min_n=3).propose(ContextIndex(3, TEXT)) == []  # no 3-token suffix occurred before


def test_prompt_lookup_copies_after_both_occurrences_and_less_after_one_token():
    """`occurrence=both` copies after the latest "5 6" (→ 7 1 2) and the first (→ 7 8 5): two branches sharing their
    7; one branch where both occurrences are one. A 1-token match ("8" alone) copies `len1` tokens, and only with
    `min_n=1`: the default proposes after 2- or 3-token matches only."""
    latest, first = Lookup(len=3, occurrence="both").propose(ContextIndex(3, TEXT))
    assert (latest.tokens, first.tokens) == ([7, 1, 2], [7, 8, 5])
    once = [5, 6, 7, 1, 5, 6]
    assert [b.tokens for b in Lookup(len=3, occurrence="both").propose(ContextIndex(3, once))] == [[7, 1, 5]]
    ends_in_8 = [3, 8, 4, 4, 4, 4, 4, 9, 8]  # "9 8" never occurred before: the 1-token "8" matches
    assert [b.tokens for b in Lookup(len=5, min_n=1, len1=2).propose(ContextIndex(3, ends_in_8))] == [[4, 4]]
    assert [b.tokens for b in Lookup(len=5, min_n=1, len1=9).propose(ContextIndex(3, ends_in_8))] == [[4, 4, 4, 4, 4]]
    assert Lookup(len=5).propose(ContextIndex(3, ends_in_8)) == []
    with pytest.raises(SpectreeError, match="len1 must be"):
        Lookup(len1=0)


def test_branches_end_at_a_stop_token_and_at_the_tokens_left():
    branch = Branch([4, 2, 7, 2], [0.5] * 4, [1] * 4)
    assert trimmed(branch, stop=(2,)).tokens == [4, 2]  # the EOS itself may be accepted; nothing after it
    assert trimmed(branch, limit=3).tokens == [4, 2, 7] and trimmed(branch, limit=0).tokens == []
    assert trimmed(branch, stop=(9,), limit=9) is branch
    index = ContextIndex(3, TEXT)
    (_, cut), = proposals([Lookup(len=3, occurrence="latest")], index, stop=(1,))
    assert [b.tokens for b in cut] == [[7, 1]]
    (_, none), = proposals([Lookup(len=3, occurrence="both")], index, limit=0)
    assert none == []  # no tokens left: nothing grafted


def test_prompt_lookup_first_occurrence_reads_the_first_match():
    """TEXT's "5 6" was first followed by 7 (position 2): `occurrence=first` copies from there, the default from the
    latest (position 9); a 1-token context only where `min_n` allows it."""
    index = ContextIndex(3, TEXT)
    assert Lookup(len=3, n=2, occurrence="first").propose(index)[0].tokens == [7, 8, 5]
    assert Lookup(len=3, n=2, occurrence="latest").propose(index)[0].tokens == [7, 1, 2]
    assert index.first[(5, 6)] == 2 and index.first[(6,)] == 2
    with pytest.raises(SpectreeError, match="occurrence must be one of"):
        Lookup(occurrence="last")


@pytest.mark.parametrize("seed", range(3))
def test_hf_rule_proposes_what_hf_prompt_lookup_proposes(seed):
    """`HF_RULE` is HF's `PromptLookupCandidateGenerator` (the last 2 tokens, then 1, first occurrence left to right,
    10 tokens): on every prefix of random texts over a small vocabulary (many repeats, many misses) both propose the
    same candidates, none where HF proposes none."""
    from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

    from spectree.retrieval.proposers import HF_RULE
    from spectree.strategies import parse_strategy

    ours = parse_strategy(f"ar+{HF_RULE}").retrieval[0]
    hf = PromptLookupCandidateGenerator(num_output_tokens=10, max_matching_ngram_size=2, max_length=10_000)
    g = torch.Generator().manual_seed(seed)
    text = torch.randint(0, 6 + 4 * seed, (120,), generator=g).tolist()
    for end in range(2, len(text)):
        prefix = text[:end]
        candidates, _ = hf.get_candidates(torch.tensor([prefix]))
        expected = candidates[0, end:].tolist()
        proposed = ours.propose(ContextIndex(ours.n, prefix))
        assert (proposed[0].tokens if proposed else []) == expected, (seed, end)


def test_the_suffix_proposer_branches_on_counts_and_extends_each_branch():
    first, second = Suffix(k=2, len=3, n=3, min_n=1).propose(ContextIndex(3, TEXT))
    assert first.tokens[0] == 7 and first.probs[0] == pytest.approx(2 / 3) and first.match[0] == 2
    assert second.tokens[0] == 9 and second.probs[0] == pytest.approx(1 / 3)
    assert first.tokens == [7, 8, 5]  # "5 6 7" → 8 (first seen) or 1: a tie, the first seen wins; then "6 7 8" → 5
    assert len(Suffix(k=5, n=3, min_n=1).propose(ContextIndex(3, TEXT))) == 2  # only two tokens ever followed


def test_grafting_merges_with_existing_children_and_appends_the_rest():
    tree = make_tree([-1, 0, 0, 1])  # node i carries token 100 + i
    n = len(tree)
    out = graft(tree, [(1, [Branch([101, 103, 55], [0.5, 0.5, 0.5], [2, 3, 4])]),
                       (2, [Branch([101, 103, 55, 56], [1.0] * 4, [1] * 4), Branch([77], [0.25], [1])])])
    assert len(out) == n + 3  # 101 → 103 exist; 55 added by lookup, 56 and 77 by the suffix index
    assert out.tokens[n:].tolist() == [55, 56, 77]
    assert out.parents[n:].tolist() == [3, n, 0] and out.depth[n:].tolist() == [3, 4, 1]
    assert out.source.tolist() == [0] * n + [1, 2, 2] and out.match_len[n:].tolist() == [4, 1, 1]
    assert out.rank[n:].tolist() == [0, 0, 1]  # a first token's place among its proposer's branches
    assert out.joint[n].item() == pytest.approx(tree.joint[3].item() * 0.5)
    assert torch.isnan(out.entropy[n:]).all()


def test_hybrid_specs_parse_print_back_and_refuse_bad_input():
    policy = parse_strategy("pct:ratio=0.2+suffix:k=3,len=6+lookup")
    assert isinstance(policy, Hybrid) and policy.spec == "pct:ratio=0.2+suffix:k=3,len=6+lookup"
    assert parse_strategy(policy.spec) == policy and policy != parse_strategy("pct:ratio=0.2+suffix")
    assert policy.drafting == parse_strategy("pct:ratio=0.2") and policy.max_depth == max(policy.d_max, 8)
    assert policy.ratio == 0.2 and policy.retrieval == (Suffix(k=3, len=6), Lookup())
    for bad, why in [("ar+nope", "unknown retrieval"), ("ar+lookup:k=2", "no parameter"), ("ar+lookup+lookup", "once"),
                     ("ar+suffix:min_n=9", "exceeds"), ("ar+suffix:len=0", ">= 1"), ("ar+suffix:k=x", "whole")]:
        with pytest.raises(SpectreeError, match=why):
            parse_strategy(bad)


@pytest.fixture(scope="module")
def loopy_target():
    return tiny_llama(seed=3, layers=2, vocab=31)  # a small vocabulary: outputs repeat, retrieval gets accepted


@pytest.mark.parametrize("mode", ["lookup:len=4", "suffix:k=2,len=4,min_n=1"])
def test_greedy_decoding_is_lossless_for_every_policy_family_with_retrieval(mode, loopy_target):
    draft = tiny_llama(seed=1, layers=1, vocab=31)
    ids = [2, 20, 21, 22, 7, 20, 21]
    with torch.inference_mode():
        ref = loopy_target.generate(torch.tensor([ids]), max_new_tokens=30, do_sample=False, eos_token_id=None,
                                    pad_token_id=0)[0, len(ids):].tolist()
    accepted = 0
    families = {spec.partition(":")[0]: spec for spec in reversed(POLICY_SPECS)}  # each family's first setting
    for spec in ["ar", *families.values()]:
        gen = speculative_generate(loopy_target, draft, ids, parse_strategy(f"{spec}+{mode}"), 30)
        assert gen.tokens == ref, spec
        accepted += sum(s.tau for s in gen.steps) - len(gen.steps)
    assert accepted > 0


class FixedPrompt:
    def apply_chat_template(self, messages, add_generation_prompt=True):
        return [3, 14, 15, 9, 3, 14]


def test_replay_equals_live_for_hybrid_trees(loopy_target):
    draft = tiny_llama(seed=1, layers=1, vocab=31)
    cfg = LogConfig(max_new_tokens=24, K=7, d_max=4, beam=400)
    logged = log_prompt(loopy_target, draft, FixedPrompt(), Prompt("toy", "0", "toy", "x"), cfg, eos_ids=())
    assert logged.prompt_ids == FixedPrompt().apply_chat_template([])
    grafted = 0
    for spec in ["ar+lookup:len=4", "chain:k=2+suffix:k=2,len=4,min_n=1", "eagle2:K=3,d_max=3,N=6+lookup:len=3+suffix:len=4",
                 "dyspec:m=6,K=3,d_max=3+suffix:k=3,len=2,min_n=1", "pct:ratio=0.05,k=3,d_max=3+lookup:len=4,min_n=1"]:
        policy = parse_strategy(spec)
        live = speculative_generate(loopy_target, draft, logged.prompt_ids, policy, 24, keep_trees=True)
        steps = replay([logged], policy)
        assert steps.tau.tolist() == [s.tau for s in live.steps], spec
        assert steps.gamma.tolist() == [s.gamma for s in live.steps], spec
        grafted += sum(int((s.tree.source > 0).sum()) for s in live.steps)
    assert grafted > 0
    with pytest.raises(SpectreeError, match="len"):
        replay([logged], parse_strategy("ar+lookup:len=8"))


def test_retrieval_nodes_carry_their_features_through_live_decoding(loopy_target):
    ids = [2, 20, 21, 22, 7, 20, 21]
    gen = speculative_generate(loopy_target, None, ids, parse_strategy("ar+suffix:k=2,len=4,min_n=1"), 16,
                               keep_trees=True)
    nodes = [(s.tree.source[1:], s.tree.match_len[1:], s.tree.draft_prob[1:]) for s in gen.steps if len(s.tree) > 1]
    assert nodes
    for source, match, prob in nodes:
        assert (source == 2).all() and (match >= 1).all() and ((prob > 0) & (prob <= 1)).all()
    assert np.isclose(sum(s.tau for s in gen.steps), len(gen.tokens)) or sum(s.tau for s in gen.steps) > len(gen.tokens)


@pytest.mark.parametrize("spec", ["ar+lookup", "ar+lookup:len=4,occurrence=both,min_n=1", "ar+suffix:k=2,len=4,min_n=1",
                                  f"ar+{HF_RULE}"])
def test_walking_a_greedy_continuation_gives_live_decodings_tau_and_gamma(spec, loopy_target):
    """`retrieval.walk` (no model) = live decoding of a retrieval-only policy, step for step in total: τ, forwards and
    γ, with an EOS that ends the generation (branches cut after it) and without one (cut to the tokens left)."""
    ids = [2, 20, 21, 22, 7, 20, 21]
    policy = parse_strategy(spec)
    plain = speculative_generate(loopy_target, None, ids, None, 40).tokens
    for stop in [(), (plain[25],)]:
        live = speculative_generate(loopy_target, None, ids, policy, 40, eos_ids=stop)
        walked = walk(policy.retrieval, ids, live.tokens, 40, stop)
        assert (walked.tokens, walked.forwards, walked.candidates) == (
            sum(s.tau for s in live.steps), len(live.steps), sum(s.gamma for s in live.steps)), (spec, stop)


def test_replay_cuts_branches_as_live_at_an_eos(loopy_target):
    """A generation ended by an EOS: replay cuts the branches after it and to the tokens left, as live does."""
    draft = tiny_llama(seed=1, layers=1, vocab=31)
    ids = FixedPrompt().apply_chat_template([])
    eos = speculative_generate(loopy_target, None, ids, None, 24).tokens[15]
    cfg = LogConfig(max_new_tokens=24, K=7, d_max=4, beam=400)
    logged = log_prompt(loopy_target, draft, FixedPrompt(), Prompt("toy", "0", "toy", "x"), cfg, eos_ids=(eos,))
    assert logged.n_valid < 24
    for spec in ["ar+lookup:len=4", "chain:k=2+lookup:len=4,min_n=1"]:
        policy = parse_strategy(spec)
        live = speculative_generate(loopy_target, draft, ids, policy, 24, eos_ids=(eos,))
        steps = replay([logged], policy)
        assert steps.tau.tolist() == [s.tau for s in live.steps], spec
        assert steps.gamma.tolist() == [s.gamma for s in live.steps], spec
