"""Prepacked linears (`spectree.core.kernels`): same products, same parameters, lossless decoding on them."""
import pytest
import torch
from helpers import tiny_llama

from spectree.core.decode import speculative_generate
from spectree.core.kernels import (
    NEVER,
    PackedLinear,
    best_threshold,
    crossover,
    crossovers,
    is_packed,
    kernels_in_use,
    pack_linears,
    packing_available,
    stock_kernels,
    use_kernels,
)
from spectree.drafts.edd import EDDDrafter, one_layer_draft, reduce_vocab
from spectree.strategies import parse_strategy

pytestmark = pytest.mark.skipif(not packing_available(torch.nn.Linear(2, 2)), reason="no oneDNN in this torch build")


def test_packed_linear_computes_what_the_linear_did_and_keeps_its_parameters():
    gen = torch.Generator().manual_seed(0)
    lin = torch.nn.Linear(48, 200, bias=True)
    before = {k: v.clone() for k, v in lin.state_dict().items()}
    x = torch.randn(3, 7, 48, generator=gen)
    with torch.inference_mode():
        ref = lin(x)
        assert pack_linears(lin) == 1 and isinstance(lin, PackedLinear) and is_packed(lin)
        assert torch.allclose(lin(x), ref, atol=1e-5)
        with stock_kernels(lin):
            assert not is_packed(lin) and torch.equal(lin(x), ref)
        assert is_packed(lin)
    assert pack_linears(lin) == 0  # idempotent
    assert lin.state_dict().keys() == before.keys() and all(torch.equal(lin.state_dict()[k], v) for k, v in before.items())


def test_packed_linear_repacks_after_an_in_place_update_and_trains_through_autograd():
    lin = torch.nn.Linear(16, 8, bias=False)
    pack_linears(lin)
    x = torch.randn(2, 16, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        lin.weight.mul_(2.0)  # an optimiser step, in place
        assert torch.allclose(lin(x), x @ lin.weight.T, atol=1e-5)
    lin(x).sum().backward()  # with autograd recording it is the stock F.linear
    assert torch.allclose(lin.weight.grad, x.sum(0).expand(8, 16))


@pytest.mark.parametrize("spec", ["chain:k=3", "kary:b=2,d=3", "eagle2:K=3,d_max=4,N=8"])
def test_greedy_decoding_on_packed_kernels_matches_stock_generate(spec):
    target = tiny_llama(0, layers=3)
    draft = one_layer_draft(target)
    reduce_vocab(draft, torch.arange(0, 60))  # the reduced head is a Linear too
    ids = [1, 17, 29, 4, 8]
    with torch.inference_mode():
        ref = target.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False,
                              eos_token_id=None, pad_token_id=0)[0, len(ids):].tolist()
    assert pack_linears(target, draft) > 0 and is_packed(draft.lm_head)
    out = speculative_generate(target, EDDDrafter(draft, hidden_layer=2), ids, parse_strategy(spec), 24)
    assert out.tokens == ref and len(out.tokens) == len(ref)


def test_unknown_kernels_name_is_refused_before_any_model_loads(tmp_path, monkeypatch):
    from spectree.core.errors import SpectreeError
    from spectree.models.loading import load_pair

    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))  # a model load would fail here: nothing is downloaded
    with pytest.raises(SpectreeError, match="unknown kernels 'fast'"):
        load_pair("smollm2-layerskip", kernels="fast")


def test_below_its_crossover_a_packed_linear_takes_the_stock_product():
    gen = torch.Generator().manual_seed(2)
    lin = torch.nn.Linear(32, 64, bias=False)
    pack_linears(lin, min_rows={(64, 32): 4})
    few, many = torch.randn(1, 3, 32, generator=gen), torch.randn(1, 5, 32, generator=gen)
    with torch.inference_mode():
        with stock_kernels(lin):
            ref_few, ref_many = lin(few), lin(many)
        assert torch.equal(lin(few), ref_few)  # 3 rows < 4: F.linear itself, bit for bit
        assert torch.allclose(lin(many), ref_many, atol=1e-5)
    assert kernels_in_use(lin) == "auto" and lin.min_rows == 4
    pack_linears(lin)  # packed again without crossovers: every product packed
    assert kernels_in_use(lin) == "packed" and kernels_in_use(torch.nn.Linear(2, 2)) == "stock"


def test_crossover_is_a_row_count_of_the_grid_and_crossovers_are_cached_per_machine(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    rows = (1, 8, 64)
    assert crossover(96, 48, rows) in (*rows, NEVER)
    model = torch.nn.Sequential(torch.nn.Linear(48, 96), torch.nn.Linear(96, 48), torch.nn.Linear(48, 96))
    table = crossovers(model, rows=rows)
    assert set(table) == {(96, 48), (48, 96)} and all(v in (*rows, NEVER) for v in table.values())
    cached = next((tmp_path).rglob("crossover-*.json"))
    stamp = cached.stat().st_mtime_ns
    assert crossovers(model, rows=rows) == table and cached.stat().st_mtime_ns == stamp  # read, not re-timed
    use_kernels("auto", model)  # on the default grid: timed again (other terms), then cached
    default = crossovers(model)
    assert all(m.min_rows == default[(m.out_features, m.in_features)] for m in model)


@pytest.mark.parametrize("spec", ["chain:k=3", "eagle2:K=3,d_max=4,N=8"])
def test_greedy_decoding_on_auto_kernels_matches_stock_generate(spec, tmp_path, monkeypatch):
    """Mixed products (stock below a crossover, packed above) inside one decode stay lossless."""
    target = tiny_llama(0, layers=3)
    draft = one_layer_draft(target)
    ids = [1, 17, 29, 4, 8]
    with torch.inference_mode():
        ref = target.generate(torch.tensor([ids]), max_new_tokens=24, do_sample=False,
                              eos_token_id=None, pad_token_id=0)[0, len(ids):].tolist()
    pack_linears(target, draft, min_rows={s: 3 for s in {(m.out_features, m.in_features) for m in target.modules()
                                                          if isinstance(m, torch.nn.Linear)}})
    assert kernels_in_use(target) == "auto"
    out = speculative_generate(target, EDDDrafter(draft, hidden_layer=2), ids, parse_strategy(spec), 24)
    assert out.tokens == ref


def test_the_crossover_is_the_threshold_that_gains_most_over_the_grid_not_one_noisy_row():
    rows = [1, 2, 4, 8, 16]
    assert best_threshold(rows, [-0.2, 0.4, -0.05, 0.3, 0.3]) == 2  # one loss at 4 rows does not push it to 8
    assert best_threshold(rows, [0.1, 0.4, 0.2, 0.3, 0.3]) == 1
    assert best_threshold(rows, [-0.2, -0.4, -0.1, -0.01, 0.05]) == 16
    assert best_threshold(rows, [-0.2, -0.4, -0.1, -0.1, -0.05]) == NEVER
