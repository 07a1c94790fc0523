import torch

from spectree.sampling import entropy, log_partition_and_entropy, row_topk, topm_entropy


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


def test_log_partition_and_entropy_match_the_definitions():
    x = torch.randn(5, 3000, generator=torch.Generator().manual_seed(1)) * 4
    x[0, :10] = float("-inf")  # masked tokens contribute nothing
    log_z, h = log_partition_and_entropy(x)
    assert torch.allclose(log_z, torch.logsumexp(x, -1), atol=1e-5)
    assert torch.allclose(h, entropy(torch.softmax(x, -1)), atol=1e-4)


def test_topm_entropy_is_the_entropy_of_the_renormalised_top_m_probabilities():
    x = torch.randn(3, 2000, generator=torch.Generator().manual_seed(2)) * 2
    top = torch.softmax(x, -1).topk(100, dim=-1).values
    assert torch.allclose(topm_entropy(x, 100), entropy(top / top.sum(-1, keepdim=True)), atol=1e-5)
