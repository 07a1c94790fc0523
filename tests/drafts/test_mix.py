"""The synthetic draft `mix:λ:DRAFT` (q_λ = (1 − λ)·q_draft + λ·p_target) on a tiny folder pair: λ = 0 is the real
draft exactly (same logged trees), λ = 1 an oracle (every chain token accepted), greedy decoding stays lossless at
every λ, bench reports its rows as synthetic, and a bad λ is refused before any weights load."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import own_pair_folders

from spectree.core.decode import as_drafter, speculative_generate
from spectree.core.errors import SpectreeError
from spectree.drafts.draftspec import parse_draft
from spectree.models import pairs
from spectree.models.loading import load_pair
from spectree.drafts.mix import MixDrafter, mix_logits
from spectree.prompts import Prompt, chat_ids
from spectree.replay.logbook import LogConfig, log_prompt
from spectree.strategies import parse_strategy

PROMPTS = [Prompt("own", "0", "writing", "Write a haiku about trees."),
           Prompt("own", "1", "coding", "def f(x): return x * 2  # explain")]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return own_pair_folders(tmp_path_factory.mktemp("mix"))


def mix_pair(folders, weight) -> str:
    target, draft = folders
    return f"{target}+mix:{weight}:hf:{draft}"


@pytest.fixture(scope="module")
def real(folders):
    return load_pair(f"{folders[0]}+hf:{folders[1]}", device="cpu")


def test_mix_logits_is_the_log_of_the_mixture():
    g = torch.Generator().manual_seed(0)
    d, t = torch.randn(3, 50, generator=g) * 3, torch.randn(3, 50, generator=g) * 3
    q = 0.7 * d.softmax(-1) + 0.3 * t.softmax(-1)
    assert torch.allclose(mix_logits(d, t, 0.3).exp(), q, atol=1e-6)
    assert mix_logits(d, t, 0.0) is d and torch.equal(mix_logits(d, t, 1.0), t)  # untouched at both ends


@pytest.mark.parametrize("spec", ["mix:1.5:edd:smollm2-edd", "mix:x:edd:smollm2-edd", "mix:0.5:mix:0.5:layerskip:4",
                                  "mix:0.5:nope:1"])
def test_a_bad_mix_spec_is_refused(spec):
    with pytest.raises(SpectreeError, match="mix|draft"):
        parse_draft(spec)


def test_mix_pairs_are_checked_through_their_real_draft(folders, tmp_path):
    target, draft = folders
    assert pairs.check_pair_name(mix_pair(folders, 0.6)).draft == f"mix:0.6:hf:{draft}"
    with pytest.raises(SpectreeError, match="pair"):
        pairs.check_pair_name(f"{target}+mix:0.6:hf:{tmp_path / 'missing'}")
    assert pairs.draft_digest(mix_pair(folders, 0.6)).startswith("mix:0.6:")
    assert pairs.draft_digest(mix_pair(folders, 0.6)) != pairs.draft_digest(mix_pair(folders, 0.3))
    assert pairs.pair_tag(mix_pair(folders, 0.6)) != pairs.pair_tag(mix_pair(folders, 0.3))


def logged(target, draft, tok, cfg) -> pd.DataFrame:
    return pd.concat([log_prompt(target, draft, tok, p, cfg, (tok.eos_token_id,)).nodes for p in PROMPTS])


def test_weight_zero_logs_exactly_the_real_drafts_trees(real):
    target, draft, tok = real
    cfg = LogConfig(max_new_tokens=8, K=3, d_max=3, beam=3, b_env=2, d_env=2)
    mixed = MixDrafter(as_drafter(draft), target, 0.0)
    pd.testing.assert_frame_equal(logged(target, draft, tok, cfg), logged(target, mixed, tok, cfg))
    half = logged(target, MixDrafter(as_drafter(draft), target, 0.5), tok, cfg).draft_prob.to_numpy()
    own = logged(target, draft, tok, cfg).draft_prob.to_numpy()
    assert len(half) != len(own) or not np.allclose(half, own)  # another draft: other values (and tree shapes)


@pytest.mark.parametrize("weight", [0.0, 0.4, 1.0])
def test_mix_drafts_decode_losslessly(folders, real, weight):
    target, _, tok = real
    _, mixed, _ = load_pair(mix_pair(folders, weight), device="cpu")
    assert isinstance(mixed, MixDrafter) and mixed.weight == weight
    for prompt in PROMPTS:
        ids = chat_ids(tok, prompt.text)
        ref = speculative_generate(target, None, ids, None, 12, eos_ids=(tok.eos_token_id,)).tokens
        for spec in ["chain:k=3", "eagle2:K=3,d_max=3,N=6"]:
            out = speculative_generate(target, mixed, ids, parse_strategy(spec), 12, eos_ids=(tok.eos_token_id,))
            assert out.tokens == ref, (weight, spec, prompt.key)
            if weight == 1.0 and spec == "chain:k=3":  # the oracle: every chain accepted but where the output ends
                assert all(s.tau == 4 for s in out.steps[:-1]), [s.tau for s in out.steps]


def test_bench_marks_mix_rows_as_synthetic(folders):
    from spectree.speed.bench import run_strategies, summarize_runs
    from spectree.speed.references import HF

    models = load_pair(mix_pair(folders, 0.5), device="cpu")
    table = summarize_runs(run_strategies(models, PROMPTS[:1], {"chain": parse_strategy("chain:k=2")}, 6,
                                          warmup=False)).set_index("strategy")
    assert table.loc["chain", "synthetic"] and not table.loc[HF, "synthetic"]
    assert np.isnan(table.loc["chain", "speedup"]) and np.isnan(table.loc["chain", "tokens_per_s"])
    assert table.loc["chain", "tau"] >= 1.0 and table.loc["chain", "exact"] == 1.0
