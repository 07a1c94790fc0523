"""EDD: the dual-block training mask, and lossless decoding with a soft-prompt draft (tiny random Llama)."""
import torch

from spectree.decode import speculative_generate
from spectree.edd import EDDDrafter, dual_block_allowed, one_layer_draft
from spectree.strategies import chain_policy, kary_policy
from spectree.treeattn import additive_mask


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


def test_edd_inference_sees_what_training_showed_it(tiny_target):
    """The drafter's root logits equal the training-time forward at the same block position."""
    draft, layer = one_layer_draft(tiny_target), 2
    ids = torch.tensor([3, 9, 27, 81, 5, 15])
    with torch.inference_mode():
        hidden = tiny_target(ids[None], output_hidden_states=True).hidden_states[layer][0]
        drafter = EDDDrafter(draft, layer)
        root = drafter.start(ids.tolist(), hidden[:-1])
        t = len(ids)
        x = torch.cat([hidden, draft.model.embed_tokens(ids)])[None]
        pos = torch.cat([torch.arange(t), torch.arange(t)])[None]
        allowed = dual_block_allowed(t, block=10, offset=10 - (t - 1))  # block starts at the last token
        h = draft.model(inputs_embeds=x, attention_mask=additive_mask(allowed, x.dtype), position_ids=pos)
        ref = draft.lm_head(h.last_hidden_state[0, -1])
    assert torch.allclose(root, ref, atol=1e-5)


def test_greedy_decoding_with_edd_matches_autoregressive(tiny_target):
    drafter = EDDDrafter(one_layer_draft(tiny_target), hidden_layer=2)
    ids = [1, 17, 29, 4, 8]
    with torch.inference_mode():
        ref = tiny_target.generate(torch.tensor([ids]), max_new_tokens=30, do_sample=False,
                                   eos_token_id=None, pad_token_id=0)[0, len(ids):].tolist()
    for policy in (chain_policy(4), kary_policy(2, 3)):
        assert speculative_generate(tiny_target, drafter, ids, policy, 30).tokens == ref


def test_chain_tau_from_forced_agreement_equals_live_chain_decoding(tiny_target):
    from helpers import tiny_llama
    from spectree.acceptance import chain_taus, forced_chain_agreement

    ids = [2, 40, 41, 42]
    for draft in (tiny_llama(seed=1, layers=1), EDDDrafter(one_layer_draft(tiny_target), hidden_layer=2)):
        agree = forced_chain_agreement(tiny_target, draft, ids, 30, depth=4, eos_ids=())
        live = speculative_generate(tiny_target, draft, ids, chain_policy(4), 30)
        assert chain_taus(agree, 4) == [s.tau for s in live.steps]
    perfect = forced_chain_agreement(tiny_target, tiny_target, ids, 12, depth=3, eos_ids=())
    assert perfect.all()


def test_shipped_draft_checkpoint_roundtrip_and_clear_errors(tiny_target, tmp_path):
    import pytest
    from safetensors.torch import save_file

    from spectree.errors import SpectreeError
    from spectree.models import load_trained_draft

    layer = one_layer_draft(tiny_target).model.layers[0]
    good = {f"layer.{k}": v.half().contiguous() for k, v in layer.state_dict().items()}
    save_file(good, str(tmp_path / "edd.safetensors"), metadata={"kind": "edd", "hidden_layer": "2"})
    drafter = load_trained_draft(tmp_path / "edd.safetensors", tiny_target)
    assert isinstance(drafter, EDDDrafter) and drafter.hidden_layer == 2

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
