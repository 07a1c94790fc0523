"""Self-distillation data (the target's batched greedy answers) and the cached top-k teacher."""
from types import SimpleNamespace

import pytest
import torch

from spectree.core.errors import SpectreeError
from spectree.training.selfdistill import (
    MAX_PROMPT_TOKENS,
    _load_seqs,
    _save_seqs,
    answer_prompts,
    cached_answer_prompts,
    greedy_answers,
    pack,
    target_answers,
)
from spectree.training.training import (
    Teacher,
    TrainConfig,
    learning_rate,
    loss_fn,
    position_weights,
)


def test_batched_left_padded_greedy_equals_one_prompt_at_a_time(tiny_target):
    tok = SimpleNamespace(pad_token_id=0, eos_token_id=1)
    gen = torch.Generator().manual_seed(3)
    prompts = [torch.randint(2, 60, (n,), generator=gen).tolist() for n in (3, 9, 5)]
    batched = greedy_answers(tiny_target, tok, prompts, max_new_tokens=8)
    alone = [greedy_answers(tiny_target, tok, [p], max_new_tokens=8)[0] for p in prompts]
    assert batched == alone
    for p, seq in zip(prompts, batched):
        assert seq[:len(p)] == p and len(p) < len(seq) <= len(p) + 8
        assert tok.eos_token_id not in seq[len(p):-1]  # cut right after the first EOS, if any


def test_pack_is_seeded_and_keeps_every_full_window(tmp_path):
    seqs = [list(range(i * 10, i * 10 + n)) for i, n in enumerate((4, 7, 2, 9))]
    windows = pack(seqs, 5, seed=1)
    assert windows == pack(seqs, 5, seed=1) and all(len(w) == 5 for w in windows)
    assert len(windows) == sum(map(len, seqs)) // 5
    assert len({t for w in windows for t in w}) == len(windows) * 5  # each token once, the tail dropped
    _save_seqs(tmp_path / "s.npz", seqs)
    assert _load_seqs(tmp_path / "s.npz") == seqs


def test_topk_teacher_is_cached_and_equals_full_kl_when_k_is_the_vocabulary(tiny_target):
    vocab = tiny_target.config.vocab_size
    tokens = torch.randint(0, vocab, (2, 12), generator=torch.Generator().manual_seed(0))
    full_hidden, logits = Teacher(tiny_target, 2, 0)(tokens)
    teacher = Teacher(tiny_target, 2, vocab)
    hidden, top = teacher(tokens)
    assert len(teacher.cache) == 2 and torch.allclose(hidden, full_hidden, atol=1e-2)
    again_hidden, again_top = teacher(tokens[[1, 0]])  # served from the cache, rows in the asked order
    assert torch.equal(again_hidden[0], hidden[1]) and torch.equal(again_top[0][1], top[0][0])
    draft_logits = torch.randn(2, 12, vocab, generator=torch.Generator().manual_seed(1))
    assert loss_fn(draft_logits, tokens, top, "kl").item() == pytest.approx(
        loss_fn(draft_logits, tokens, logits, "kl").item(), rel=1e-3)


def test_training_config_rejects_unknown_data_and_negative_sizes():
    with pytest.raises(SpectreeError, match="training data"):
        TrainConfig(data="wiki")
    with pytest.raises(SpectreeError, match="teacher_topk"):
        TrainConfig(teacher_topk=-1)
    with pytest.raises(SpectreeError, match="decay"):
        TrainConfig(decay=-1)


def test_learning_rate_warms_up_holds_then_decays_linearly_to_zero():
    cfg = TrainConfig(lr=1.0, warmup=4, decay=5, steps=20)
    lrs = [learning_rate(cfg, s) for s in range(cfg.steps)]
    assert lrs[:4] == pytest.approx([0.25, 0.5, 0.75, 1.0]) and set(lrs[4:15]) == {1.0}
    assert lrs[15:] == pytest.approx([1.0, 0.8, 0.6, 0.4, 0.2])
    assert [learning_rate(TrainConfig(lr=2.0, warmup=0), s) for s in (0, 1999)] == [2.0, 2.0]  # constant by default


def test_root_weight_scales_only_the_block_starts_and_keeps_the_mean_loss_scale():
    w = position_weights(12, block=5, offset=2, root_weight=4.0)  # blocks start at 0, 3, 8
    assert w.mean().item() == pytest.approx(1.0)
    assert torch.allclose(w[[0, 3, 8]], w[0].expand(3)) and w[0].item() == pytest.approx(4 * w[1].item())
    assert torch.equal(position_weights(12, 5, 2, 1.0), torch.ones(12))
    gen = torch.Generator().manual_seed(0)
    logits, teacher = torch.randn(2, 12, 7, generator=gen), torch.randn(2, 12, 7, generator=gen)
    tokens = torch.randint(0, 7, (2, 12), generator=gen)
    logp, logq = logits.log_softmax(-1), teacher.log_softmax(-1)
    per_token = (logq.exp() * (logq - logp)).sum(-1)  # [2, 12]
    assert loss_fn(logits, tokens, teacher, "kl", w).item() == pytest.approx((per_token * w).mean().item(), rel=1e-5)
    nll = -logp[:, :-1].gather(-1, tokens[:, 1:, None])[..., 0]
    assert loss_fn(logits, tokens, teacher, "ce").item() == pytest.approx(nll.mean().item(), rel=1e-5)


class CharTokenizer:
    """Chat template = the message's characters as ids (enough to test prompt selection)."""

    def apply_chat_template(self, messages, add_generation_prompt=True):
        return [ord(c) % 1000 for c in messages[0]["content"]]


def test_answer_prompts_draw_seeded_prompts_of_the_named_source_within_its_length_limit():
    tok = CharTokenizer()
    code = answer_prompts(tok, seed=0, n=5, source="pystdlib")
    assert code == answer_prompts(tok, seed=0, n=5, source="pystdlib") != answer_prompts(tok, seed=1, n=5, source="pystdlib")
    assert all(len(ids) <= MAX_PROMPT_TOKENS["pystdlib"] for ids in code)
    texts = {"".join(chr(i) for i in ids) for ids in code}
    assert all(t.startswith("Complete the following Python function:") for t in texts)
    assert len(answer_prompts(tok, seed=0, n=5)) == 5  # ShareGPT by default
    with pytest.raises(SpectreeError, match="prompt source"):
        answer_prompts(tok, seed=0, n=1, source="humaneval")  # a held-out set is never training text
    with pytest.raises(SpectreeError, match="self_code_prompts"):
        TrainConfig(self_code_prompts=-1)


class NoSourceTokenizer(CharTokenizer):
    """Fails if asked to template a prompt: proves an answer came from the prompt cache."""

    pad_token_id, eos_token_id = 0, 1

    def apply_chat_template(self, messages, add_generation_prompt=True):
        raise AssertionError("the prompt source was read although the cache holds enough prompts")


def test_prompt_cache_answers_any_shorter_request_and_generation_needs_no_prompt_source(tmp_path, monkeypatch, tiny_target):
    monkeypatch.setenv("SPECTREE_HOME", str(tmp_path))
    folder = tmp_path / "data" / "cache" / "train" / "self-answers-pystdlib-4-0-8"  # shard grows to the batch (8)
    made = cached_answer_prompts(folder, CharTokenizer(), 0, 6, "pystdlib")
    assert made == answer_prompts(CharTokenizer(), seed=0, n=6, source="pystdlib")
    assert cached_answer_prompts(folder, NoSourceTokenizer(), 0, 4, "pystdlib") == made[:4]  # a prefix, from the cache
    short = [[2 + t % 60 for t in p[:12]] for p in made]  # within the tiny model's vocabulary and context
    _save_seqs(folder / "prompts.npz", short)
    seqs = target_answers(tiny_target, NoSourceTokenizer(), 6, max_new_tokens=4, seed=0, batch=8, shard=2,
                          source="pystdlib")
    assert [s[:12] for s in seqs] == short
    assert sorted(p.name for p in folder.iterdir()) == ["manifest.json", "prompts.npz", "shard-00000.npz"]
