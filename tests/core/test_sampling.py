import math

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from spectree.core.sampling import (
    entropy,
    rank_in_row,
    row_topk,
    sample_without_replacement,
    softmax_entropy,
    top_values,
    topm_entropy,
)


def test_row_topk_returns_the_same_values_and_indices_as_topk():
    gen = torch.Generator().manual_seed(0)
    for v, k in [(49152, 8), (49152, 1), (4096, 32), (1000, 8), (96, 8)]:  # the last two fall back to topk
        x = torch.randn(6, v, generator=gen) * 3
        values, idx = row_topk(x, k)
        ref = x.topk(k, dim=-1)
        assert torch.equal(values, ref.values) and torch.equal(idx, ref.indices)


def test_row_topk_is_exact_when_the_top_k_share_one_chunk():
    x = torch.zeros(2, 4096)
    x[:, 128:136] = torch.arange(8, 0, -1).float()  # all eight winners in one 64-column chunk
    values, idx = row_topk(x, 8)
    assert torch.equal(idx[0], torch.arange(128, 136)) and torch.equal(values[0], torch.arange(8, 0, -1).float())


def test_top_values_are_the_top_m_of_each_row_ties_and_minus_infinity_included():
    gen = torch.Generator().manual_seed(3)
    for v, m in [(49152, 1000), (8192, 1000), (4096, 700), (3000, 100), (1000, 1000)]:  # the last two: partition
        x = torch.randn(3, v, generator=gen) * 3
        x[1] = x[1].round()  # few distinct values: ties at the boundary
        x[2, 50:] = float("-inf")  # fewer finite values than m
        got = np.sort(top_values(x, m), axis=-1)
        assert np.array_equal(got, np.sort(x.topk(m, dim=-1).values.numpy(), axis=-1)), (v, m)


def test_softmax_entropy_matches_the_definition():
    x = torch.randn(5, 3000, generator=torch.Generator().manual_seed(1)) * 4
    x[0, :10] = float("-inf")  # masked tokens contribute nothing
    p = torch.softmax(x, -1)
    top, top_prob = x.amax(-1), p.amax(-1)
    reference = entropy(torch.softmax(x.double(), -1))
    assert torch.allclose(softmax_entropy(p, x, top, top_prob).double(), reference, atol=1e-4)
    flat = torch.zeros(1, 3000)  # the uniform row: log V
    assert softmax_entropy(torch.softmax(flat, -1), flat, flat.amax(-1), torch.full((1,), 1 / 3000)).item() \
        == pytest.approx(math.log(3000), abs=1e-4)


def test_topm_entropy_is_the_entropy_of_the_renormalised_top_m_probabilities():
    x = torch.randn(3, 2000, generator=torch.Generator().manual_seed(2)) * 2
    top = torch.softmax(x, -1).topk(100, dim=-1).values
    assert torch.allclose(topm_entropy(x, 100), entropy(top / top.sum(-1, keepdim=True)), atol=1e-5)


def test_rank_in_row_counts_the_larger_logits_inside_and_outside_the_head():
    g = torch.Generator().manual_seed(0)
    for vocab in (100, 49152):
        x = torch.randn(20, vocab, generator=g) * 3  # [f, V]
        tok = torch.randint(0, vocab, (20, 3), generator=g)  # rows 10..19: mostly far outside the top 64
        tok[:10] = x[:10].topk(3).indices.flip(-1)  # rows 0..9: inside the head
        values = x.gather(-1, tok)
        want = torch.stack([(x > values[:, j, None]).sum(-1) for j in range(3)], -1)
        assert torch.equal(rank_in_row(x, values), want)


def test_sample_without_replacement_draws_in_order_from_the_renormalised_rows():
    """First draws follow the row; second draws follow the row renormalised without the first (χ²); a row
    with fewer positive tokens than k marks the extra draws invalid. V = 130 is not a multiple of the chunk."""
    g = torch.Generator().manual_seed(1)
    w = torch.rand(1, 130, generator=g) ** 6
    w[0, 5] = 0.0
    w = w / w.sum()
    n = 20000
    tok, valid = sample_without_replacement(w.expand(n, 130).contiguous(), 3, g)  # [n, 3]
    assert bool(valid.all()) and bool((tok[:, 0] != tok[:, 1]).all() & (tok[:, 1] != tok[:, 2]).all()
                                       & (tok[:, 0] != tok[:, 2]).all())
    p = w[0].double()
    first = torch.bincount(tok[:, 0], minlength=130).double()
    big = p * n > 5
    assert chisquare(first[big].numpy(), (p[big] / p[big].sum() * first[big].sum()).numpy()).pvalue > 1e-3
    top = p.topk(6).indices.tolist()
    pairs = [(a, b) for a in top for b in top if a != b]
    seen = {pair: 0 for pair in pairs}
    for a, b in tok[:, :2].tolist():
        if (a, b) in seen:
            seen[(a, b)] += 1
    obs = np.array([seen[pair] for pair in pairs], float)
    want = np.array([float(p[a] * p[b] / (1 - p[a])) for a, b in pairs])
    assert chisquare(obs, want / want.sum() * obs.sum()).pvalue > 1e-3
    few = torch.zeros(2, 200)
    few[0, 3] = few[0, 150] = 0.5
    few[1, 7] = 1.0
    tok, valid = sample_without_replacement(few, 3, g)
    assert valid.tolist() == [[True, True, False], [True, False, False]]
    assert sorted(tok[0, :2].tolist()) == [3, 150] and tok[1, 0] == 7 and int(tok.max()) < 200

