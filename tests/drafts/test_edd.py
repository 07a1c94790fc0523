"""EDD: the dual-block training mask, and lossless decoding with a soft-prompt draft (tiny random Llama)."""
import numpy as np
import pytest
import torch

from spectree.core.decode import speculative_generate
from spectree.drafts.edd import (
    EDDDrafter,
    add_fusion,
    dual_block_allowed,
    one_layer_draft,
    reduce_vocab,
)
from spectree.strategies.chain import Chain
from spectree.strategies.static import Kary


def test_dual_block_mask_matches_the_paper_with_block_length_2():
    allowed = dual_block_allowed(4, block=2)  # entries: h0 h1 h2 h3 t0 t1 t2 t3
    tokens = allowed[4:]
    assert tokens[0].nonzero().flatten().tolist() == [4]  # t0: block 0 → no hidden, itself
    assert tokens[1].nonzero().flatten().tolist() == [4, 5]  # t1: t0, t1
    assert tokens[2].nonzero().flatten().tolist() == [0, 1, 6]  # t2: h0, h1 and itself
    assert tokens[3].nonzero().flatten().tolist() == [0, 1, 6, 7]
    assert torch.equal(allowed[:4, :4], torch.ones(4, 4, dtype=torch.bool).tril())


def test_dual_block_offset_shifts_the_block_starts():
    allowed = dual_block_allowed(5, block=3, offset=1)  # blocks start at tokens 0, 2
    assert allowed[5 + 1].nonzero().flatten().tolist() == [5, 6]
    assert allowed[5 + 2].nonzero().flatten().tolist() == [0, 1, 7]


@pytest.mark.parametrize("hidden_norm,fuse", [(False, False), (True, False), (True, True), (False, True)])
def test_edd_inference_sees_what_training_showed_it(tiny_target, hidden_norm, fuse):
    """The drafter's logits at the root and down a chain equal the training forward (`draft_logits`) at
    the same block positions — soft prompt, final-norm option and h_{s-1} fusion included."""
    from spectree.analysis.acceptance import _chain_tree
    from spectree.training.training import TrainConfig, draft_logits

    draft, layer = one_layer_draft(tiny_target), 2
    if fuse:
        torch.nn.init.normal_(add_fusion(draft).fuse.weight, std=0.5, generator=torch.Generator().manual_seed(0))
    ids = torch.tensor([3, 9, 27, 81, 5, 15, 7, 11])  # the root is ids[5]; 7, 11 are drafted below it
    s = 5
    with torch.inference_mode():
        hidden = tiny_target(ids[None], output_hidden_states=True).hidden_states[layer]  # [1, 8, H]
        drafter = EDDDrafter(draft, layer, hidden_norm)
        root = drafter.start(ids[:s + 1].tolist(), hidden[0, :s])
        chain = drafter.lm.feed_tree(_chain_tree(ids[s:].tolist(), s + 1), torch.arange(1, 3)).logits[0]  # [2, V]
        cfg = TrainConfig(hidden_norm=hidden_norm, fuse=fuse)
        ref = draft_logits(draft, tiny_target, ids[None], cfg, hidden,
                           block=10, offset=10 - s)[0]  # one block starting at s
    assert torch.allclose(root, ref[s], atol=1e-5)
    assert torch.allclose(chain, ref[s + 1:s + 3], atol=1e-5)


@pytest.mark.parametrize("reduced", [False, True])
def test_greedy_decoding_with_edd_matches_autoregressive(tiny_target, reduced):
    draft = one_layer_draft(tiny_target)
    if reduced:  # a draft that can propose only 20 of the vocabulary's tokens
        reduce_vocab(draft, torch.arange(0, 40, 2))
    drafter = EDDDrafter(draft, hidden_layer=2)
    ids = [1, 17, 29, 4, 8]
    with torch.inference_mode():
        ref = tiny_target.generate(torch.tensor([ids]), max_new_tokens=30, do_sample=False,
                                   eos_token_id=None, pad_token_id=0)[0, len(ids):].tolist()
    for policy in (Chain(k=4), Kary(b=2, d=3)):
        out = speculative_generate(tiny_target, drafter, ids, policy, 30)
        assert out.tokens == ref and len(out.tokens) == len(ref)


def test_reduced_head_keeps_its_tokens_logits_and_ranks_the_rest_last(tiny_target):
    from spectree.training.selfdistill import token_ranking

    ranking = token_ranking([[5, 5, 5, 9, 9, 2], [2, 9, 5, 7]], tiny_target.config.vocab_size)
    assert ranking[:4].tolist() == [5, 9, 2, 7] and sorted(ranking.tolist()) == list(range(len(ranking)))
    draft = one_layer_draft(tiny_target)
    ids = torch.tensor([1, 2, 3, 4, 5])
    with torch.inference_mode():
        full = draft(input_ids=ids[None]).logits[0]  # [5, V]
        reduce_vocab(draft, torch.from_numpy(ranking[:4]))
        small = draft(input_ids=ids[None]).logits[0]
    keep = torch.from_numpy(ranking[:4]).long()
    assert torch.allclose(small[:, keep], full[:, keep], atol=1e-5)
    probs = small.softmax(-1)
    rest = torch.from_numpy(ranking[4:]).long()
    assert (small[:, rest].amax(-1) < small[:, keep].amin(-1)).all()  # a rare token never outranks a kept one
    assert (probs[:, rest].sum(-1) < len(rest) * 2.1e-9).all()  # e^-20 each at most
    assert tiny_target.lm_head.weight.shape[0] == tiny_target.config.vocab_size  # the target keeps its head


def test_chain_tau_from_forced_agreement_equals_live_chain_decoding(tiny_target):
    from helpers import tiny_llama

    from spectree.analysis.acceptance import chain_taus, forced_chain_agreement

    ids = [2, 40, 41, 42]
    for draft in (tiny_llama(seed=1, layers=1), EDDDrafter(one_layer_draft(tiny_target), hidden_layer=2)):
        agree = forced_chain_agreement(tiny_target, draft, ids, 30, depth=4, eos_ids=())
        live = speculative_generate(tiny_target, draft, ids, Chain(k=4), 30)
        assert chain_taus(agree, 4) == [s.tau for s in live.steps]
    perfect = forced_chain_agreement(tiny_target, tiny_target, ids, 12, depth=3, eos_ids=())
    assert perfect.all()


def test_shipped_draft_checkpoint_roundtrip_and_clear_errors(tiny_target, tmp_path):
    from safetensors.torch import save_file

    from spectree.core.errors import SpectreeError
    from spectree.models.loading import load_trained_draft

    layer = one_layer_draft(tiny_target).model.layers[0]
    good = {f"layer.{k}": v.half().contiguous() for k, v in layer.state_dict().items()}
    save_file(good, str(tmp_path / "edd.safetensors"), metadata={"kind": "edd", "hidden_layer": "2"})
    drafter = load_trained_draft(tmp_path / "edd.safetensors", tiny_target)
    assert isinstance(drafter, EDDDrafter) and drafter.hidden_layer == 2 and not drafter.hidden_norm

    size = tiny_target.config.hidden_size
    fused = {**good, "fuse.weight": torch.ones(size, size, dtype=torch.float16)}
    save_file(fused, str(tmp_path / "fused.safetensors"), metadata={"kind": "edd", "hidden_layer": "2", "hidden_norm": "1"})
    drafter = load_trained_draft(tmp_path / "fused.safetensors", tiny_target)
    assert drafter.hidden_norm and bool((drafter.lm.model.model.embed_tokens.fuse.weight == 1).all())
    fused["fuse.weight"] = torch.ones(size, 3, dtype=torch.float16)
    save_file(fused, str(tmp_path / "badfuse.safetensors"), metadata={"kind": "edd", "hidden_layer": "2"})
    with pytest.raises(SpectreeError, match="fuse.weight has shape"):
        load_trained_draft(tmp_path / "badfuse.safetensors", tiny_target)

    missing = dict(good)
    missing.pop("layer.mlp.up_proj.weight")
    save_file(missing, str(tmp_path / "missing.safetensors"), metadata={"kind": "vdm"})
    with pytest.raises(SpectreeError, match="missing .*up_proj"):
        load_trained_draft(tmp_path / "missing.safetensors", tiny_target)

    wrong = dict(good)
    wrong["layer.self_attn.q_proj.weight"] = torch.zeros(8, 8, dtype=torch.float16)
    save_file(wrong, str(tmp_path / "wrong.safetensors"), metadata={"kind": "vdm"})
    with pytest.raises(SpectreeError, match="wrong shapes"):
        load_trained_draft(tmp_path / "wrong.safetensors", tiny_target)

    (tmp_path / "cut.safetensors").write_bytes((tmp_path / "edd.safetensors").read_bytes()[:-50])
    with pytest.raises(SpectreeError, match="truncated|not a readable"):
        load_trained_draft(tmp_path / "cut.safetensors", tiny_target)
    with pytest.raises(SpectreeError, match="is missing: train it"):
        load_trained_draft(tmp_path / "absent.safetensors", tiny_target)


def test_loss_curve_keeps_window_means_and_the_last_step():
    from spectree.training.training import loss_curve

    log = [(s, float(s), 0.5 * s) for s in range(1, 11)]
    assert loss_curve(log, points=5) == [[2, 1.5, 1.0], [4, 3.5, 2.0], [6, 5.5, 3.0], [8, 7.5, 4.0], [10, 9.5, 5.0]]
    assert loss_curve(log, points=50)[-1] == [10, 10.0, 5.0] and loss_curve([]) == []


def _report(top1_by_ds: dict, tau: float) -> dict:
    return {"top1_by_position": list(top1_by_ds.values())[0], "tau_chain": tau,
            "by_dataset": {ds: {"top1_by_position": v} for ds, v in top1_by_ds.items()}}


def test_ablation_table_by_hand():
    """The ablation table (draft_claims' verdicts are tested with real counts in tests/analysis/test_claims.py)."""
    from spectree.analysis.acceptance import ablation_table

    reports = {"edd": _report({"mtbench": [0.6, 0.5], "humaneval": [0.4, 0.3]}, 2.3),
               "ce": _report({"mtbench": [0.1, 0.1]}, 1.2)}
    table = ablation_table(reports, {"EDD": "edd", "CE": "ce", "gone": "nope"})
    assert list(table.index) == ["EDD", "CE"] and table.loc["CE", "tau_chain"] == 1.2
    assert table.loc["EDD", "top1@2"] == 0.5


def test_top_m_entropy_of_a_reduced_head_reads_only_its_kept_tokens():
    """C2T's entropy over the top-M draft probabilities: with a reduced head of >= M tokens the drafter sorts
    only the kept columns (every dropped token's logit lies below them), with the same result."""
    from helpers import frontier_rows
    from spectree.core.drafting import TOP_M, child_candidates
    from spectree.core.sampling import Sampling
    from spectree.core.tree import DraftTree
    from spectree.drafts.edd import ReducedHead

    gen = torch.Generator().manual_seed(0)
    head = torch.nn.Linear(16, 3 * TOP_M, bias=False)
    torch.nn.init.normal_(head.weight, std=2.0, generator=gen)
    reduced = ReducedHead(head, torch.randperm(3 * TOP_M, generator=gen)[: TOP_M + 200])
    with torch.inference_mode():
        logits = reduced(torch.randn(1, 16, generator=gen))  # [1, V]
    root = frontier_rows(DraftTree.root(5, prefix_len=4), [0])
    full, _ = child_candidates(root, logits, 3, Sampling(), None, frozenset({"entropy_topm"}))
    fast, _ = child_candidates(root, logits, 3, Sampling(), None, frozenset({"entropy_topm"}), reduced.kept_ids)
    every = np.arange(3)  # the column is lazy: computed at the candidates a policy reads
    assert np.allclose(fast["entropy_topm"].fn(every), full["entropy_topm"].fn(every), atol=1e-6)
    assert np.isfinite(full["entropy_topm"].fn(every)).all()
    assert np.array_equal(fast["tokens"], full["tokens"])
