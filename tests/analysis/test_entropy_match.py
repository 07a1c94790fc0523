"""Gunjur et al. Fig. 1: match rate by entropy, the crossover entropy and its claims."""
import numpy as np
import pandas as pd
import pytest
from synthetic_tokens import each_token_a_prompt, of_prompts, per_prompt, prompts, share, verdicts

from spectree.claims import claims as C
from spectree.analysis import entropy_match
from spectree.core.errors import SpectreeError


def rates(match_rate, count=100, width=0.5):
    lo = np.arange(len(match_rate)) * width
    return pd.DataFrame({"lo": lo, "hi": lo + width, "count": count, "match_rate": match_rate})


def test_crossover_entropy_interpolates_between_bin_centres():
    # centres 0.25, 0.75, 1.25, 1.75; 0.7 → 0.3 crosses 0.5 half-way between 0.75 and 1.25
    assert entropy_match.crossover_entropy(rates([0.9, 0.7, 0.3, 0.1])) == pytest.approx(1.0)
    assert entropy_match.crossover_entropy(rates([0.9, 0.8, 0.7])) is None
    assert entropy_match.crossover_entropy(rates([0.2, 0.1])) == 0.0  # mismatch likelier from the first bin on
    sparse = rates([0.9, 0.1, 0.7, 0.3]).assign(count=[100, 5, 100, 100])  # the 5-token bin is ignored
    assert entropy_match.crossover_entropy(sparse, min_count=20) == pytest.approx(1.5)


def test_match_rate_by_entropy_and_the_crossover():
    h = np.r_[np.full(100, 0.2), np.full(100, 2.2)]
    match = np.r_[np.ones(90), np.zeros(10), np.ones(10), np.zeros(90)]
    r = entropy_match.match_rate_by_entropy(h, match, (0.0, 1.0, 2.0, 3.0))
    assert r["count"].tolist() == [100, 0, 100] and r.matched.tolist() == [90, 0, 10]
    assert r.match_rate[0] == pytest.approx(0.9) and r.mismatched[2] == pytest.approx(90)
    cross = entropy_match.crossover_entropy(r)
    assert cross == pytest.approx(1.5)  # centres 0.5 (0.9) and 2.5 (0.1), the empty bin skipped


def test_crossovers_of_many_rows_agree_with_crossover_entropy():
    cases = [[0.9, 0.7, 0.3, 0.1], [0.9, 0.8, 0.7, 0.6], [0.2, 0.1, 0.9, 0.9], [0.9, 0.1, 0.7, 0.3]]
    counts = [[100] * 4, [100] * 4, [100] * 4, [100, 5, 100, 100]]
    out = entropy_match.crossovers(np.arange(4) * 0.5, np.arange(1, 5) * 0.5, np.array(counts), np.array(cases),
                              never=2.0)
    expected = [entropy_match.crossover_entropy(rates(c).assign(count=n)) for c, n in zip(cases, counts)]
    assert expected == pytest.approx([1.0, None, 0.0, 1.5]) and out.tolist() == pytest.approx([1.0, 2.0, 0.0, 1.5])
    assert np.isnan(entropy_match.crossovers([0.0], [0.5], np.array([[3]]), np.array([[0.1]]), never=2.0)[0])


EDGES = (0.0, 0.5, 1.0, 1.5, 2.0)


def gunjur_tokens(rates_by_prompt, size=20):
    """Per prompt, `size` top-1 tokens in each entropy bin (centres 0.25 … 1.75), matched at the given rates."""
    return pd.concat([of_prompts(np.full(4 * size, k), entropy=np.repeat([0.25, 0.75, 1.25, 1.75], size),
                             accept=share(rates, size))
                      for k, rates in enumerate(rates_by_prompt)], ignore_index=True)


def gunjur(top1, **kw):
    rates = entropy_match.match_rate_by_entropy(top1.entropy, top1.accept, EDGES)
    return entropy_match.gunjur_claims(top1, rates, entropy_match.crossover_entropy(rates), n_resamples=1000, **kw)


def test_gunjur_claims_hold_fail_and_need_eight_prompts():
    crossing = [(0.9, 0.7, 0.3, 0.1), (0.85, 0.65, 0.35, 0.15)] * 5  # crossover at 1.0 in every prompt
    claims = gunjur(gunjur_tokens(crossing))
    # the crossover's place is the paper's pair's (GPT-2 → GPT-2-large): ours is a reading of this pair, not a test
    assert verdicts(claims) == ["not testable", "holds"] and claims[0]["details"]["crossover"] == pytest.approx(1.0)
    assert "a property of the paper's pair" in claims[0]["rule"] and claims[0]["key"] == "gunjur-fig1-crossover"
    within = claims[0]["details"]
    assert within["within_tolerance"] == "holds" and within["crossover_prompts"] == 10
    assert within["crossover_interval"][0] <= 1.0 <= within["crossover_interval"][1]
    assert within["within_rule"] == ("95% bootstrap interval over prompts of the crossover entropy within 1 ± 0.5 "
                                     "nats (never crossing counts as 2), n ≥ 8 prompts and ≥ 20 tokens")
    assert gunjur(gunjur_tokens(crossing), paper_cutoff=3.0)[0]["details"]["within_tolerance"] == "does not hold"
    grows = claims[1]
    assert grows["rule"].startswith("every step between adjacent bins with ≥ 20 tokens") and "> 0" in grows["rule"]
    assert "equal token count" in grows["goal"] and "s1 l.58" in grows["paper"]
    assert [b["mean"] for b in grows["details"]["by_bin"]] == pytest.approx([0.125, 0.325, 0.775])  # tied edges merge
    falling = gunjur(gunjur_tokens([tuple(1 - r for r in rates) for rates in crossing]))  # crossover at 0
    assert verdicts(falling) == ["not testable", "does not hold"]
    assert falling[0]["details"]["within_tolerance"] == "does not hold"
    few = gunjur(gunjur_tokens(crossing[:5], size=60))
    assert verdicts(few) == ["not testable", "inconclusive"] and few[1]["n"] == 5
    assert few[0]["details"]["within_tolerance"] == "inconclusive"


def test_gunjur_claims_clustering_matters():
    """Five prompts cross at 0.5, five never: pooled, the crossover is 1.0 within ± 0.12 over tokens, but
    anywhere from 0.6 to never over prompts. And with mismatch rising with entropy in six prompts and falling in
    four, the pooled rise from the lower entropy bin to the upper (+0.1) is decisive over 3,000 tokens but not
    over 10 prompts."""
    split = gunjur_tokens([(0.6, 0.3, 0.2, 0.1), (0.9, 0.8, 0.7, 0.6)] * 5, size=100)
    assert gunjur(each_token_a_prompt(split))[0]["details"]["within_tolerance"] == "holds"
    clustered = gunjur(split)[0]["details"]
    assert clustered["within_tolerance"] == "inconclusive" and clustered["crossover_prompts"] == 10
    assert clustered["crossover_interval"][1] > 1.5
    rng = np.random.default_rng(0)
    h = rng.uniform(0.0, 2.0, 3000)
    rising = per_prompt([1, 1, 0, 1, 1, 0, 1, 0, 1, 0], 300) > 0
    t = of_prompts(prompts(10, 300), entropy=h, accept=(rng.random(3000) >= np.where(rising, h / 2, 1 - h / 2)) * 1.0)
    assert C.correlation_rule(t.entropy, 1 - t.accept, 0.0, "ρ", strict=True, level=0.99).verdict == "holds"
    assert gunjur(each_token_a_prompt(t), rise_bins=2)[1]["verdict"] == "holds"
    rises = gunjur(t, rise_bins=2)[1]
    assert rises["verdict"] == "inconclusive" and rises["n"] == 10 and rises["interval"][0] < 0 < rises["interval"][1]


def test_at_a_temperature_a_drawn_token_matches_with_the_targets_probability_of_it():
    """One position, the draft's distribution at T = {a: 0.5, b: 0.5}, the target's {a: 0.5, b: 0.5}: DySpec's
    min(1, T/D) accepts the top-1 token surely, but the target's own draw equals the draft's with probability
    Σ D·T = 0.5 (Alg. 1: t_sampled ∈ the tree's keys). A second position: D {a: 0.9, b: 0.1}, T {a: 0.2, b: 0.8}."""
    t = of_prompts([0, 0, 0, 0], position=[0, 0, 1, 1], rank=[0, 1, 0, 1], p=[0.5, 0.5, 0.9, 0.1],
                   target_prob=[0.5, 0.5, 0.2, 0.8], accept=[1.0, 1.0, 0.2 / 0.9, 1.0], entropy=[0.69, 0.69, 0.33, 0.33],
                   entropy_raw=[2.5, 2.5, 1.2, 1.2])  # the raw (T = 1) distribution is flatter than D at 0.4
    drawn = entropy_match.drawn_tokens(t, temperature=0.4)
    assert drawn.accept.tolist() == pytest.approx([0.5, 0.9 * 0.2 + 0.1 * 0.8])
    assert drawn.entropy.tolist() == pytest.approx([2.5, 1.2]) and len(drawn) == 2  # one row per position
    sampled = entropy_match.drawn_tokens(t, temperature=0.4, entropy_of="sampled")  # D's entropy at T
    assert sampled.entropy.tolist() == pytest.approx([0.69, 0.33]) and sampled.accept.equals(drawn.accept)
    with pytest.raises(SpectreeError, match="entropy_of must be one of"):
        entropy_match.drawn_tokens(t, temperature=0.4, entropy_of="tempered")
    greedy = entropy_match.drawn_tokens(t.assign(accept=[1.0, 0.0, 0.0, 0.0]), temperature=0.0)
    assert greedy.accept.tolist() == [1.0, 0.0]  # T = 0: the top-1 token, matched 0/1


def test_the_crossover_is_read_at_the_temperature_the_tokens_were_drawn():
    """Per prompt, positions at entropies 0.25 … 1.75 whose top-1 token DySpec's rule always accepts (T ≥ D) but
    whose drawn token matches the target's draw less and less: the top-1 rule never crosses, the paper's does."""
    rows = []
    for k in range(10):
        for pos, (h, q) in enumerate(zip(np.repeat([0.25, 0.75, 1.25, 1.75], 20), np.repeat([0.9, 0.7, 0.3, 0.1], 20))):
            rows.append(dict(prompt=k, position=pos, rank=0, p=0.5, target_prob=q, accept=1.0, entropy=h, entropy_raw=h))
            rows.append(dict(prompt=k, position=pos, rank=1, p=0.5, target_prob=q, accept=1.0, entropy=h, entropy_raw=h))
    t = of_prompts(np.array([r["prompt"] for r in rows]), **{c: np.array([r[c] for r in rows]) for c in rows[0] if c != "prompt"})
    old = gunjur(entropy_match.top1_tokens(t))
    assert old[0]["details"]["crossover"] is None and old[0]["details"]["within_tolerance"] == "does not hold"
    new = gunjur(entropy_match.drawn_tokens(t, temperature=0.4))
    assert new[0]["details"]["crossover"] == pytest.approx(1.0) and new[0]["details"]["within_tolerance"] == "holds"
    assert verdicts(new) == ["not testable", "holds"]
    assert new[0]["goal"].startswith("crossover within 1 ± 0.5 nats (our tolerance)")
    assert "entropies higher than 1" in new[0]["paper"]


def test_the_figure_names_the_entropy_it_bins():
    """Gunjur Fig. 1 bins the "logit entropy" (s1 l.24, l.58): at T = 0.4 the verdict's entropy is the raw
    distribution's (T = 1), not that of the distribution at T the token is drawn from, and the axes say so."""
    from spectree.figures.entropy import plot_entropy_match

    logits, sampled = (entropy_match.entropy_label(e, 0.4) for e in ("logits", "sampled"))
    assert "T = 1" in logits and "drawn at T = 0.4" in logits and "drafted from, at T = 0.4" in sampled
    assert entropy_match.entropy_label("logits", 0.0) == entropy_match.entropy_label("sampled", 0.0)
    with pytest.raises(SpectreeError, match="entropy_of must be one of"):
        entropy_match.entropy_label("tempered", 0.4)
    drawn = pd.DataFrame({"prompt": 0, "position": range(4), "depth": 1, "entropy": [0.5, 1.5, 2.5, 3.5],
                          "accept": [0.9, 0.6, 0.3, 0.1]})
    rates = entropy_match.match_rate_by_entropy(drawn.entropy, drawn.accept)
    fig = plot_entropy_match(drawn, rates, 2.0, 1.0, 1, logits)
    assert [ax.get_xlabel() for ax in fig.axes[:2]] == [logits, logits]
