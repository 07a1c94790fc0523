"""What C2T's classifier learned (C2T App., Fig. 9/10): its output F(P, H, d) over random inputs and over
grids with one feature fixed, partial dependence per feature, and verdicts on the paper's three readings:

1. P (joint probability) has by far the largest effect on the confidence;
2. at low P a high entropy H raises the confidence (a correction for flat draft distributions);
3. at low P a shallower depth d raises the confidence, while at high P depth hardly matters.

Ranges: P ∈ [0, 1] and d ∈ 0..10 as in the paper (s0 l.435); H ∈ [0, ln M] (nats), where the paper draws
[0, 10]: the entropy of M = 1000 probabilities cannot exceed ln 1000 = 6.91, so the classifier never sees more
and the paper's upper third is extrapolation. Depth d is Alg. 1's (s0 l.132, l.141: the first drafted layer has
d = 0); our `Nodes` put that layer at depth 1, so the classifier is fed d + 1 (`DEPTH_OFFSET`). Verdicts are on
the confidence sigmoid(F) — the quantity compared with β; the 3-D scatter is coloured by the min-max normalised
logit, as C2T Fig. 9 is.

The units of evidence. The surfaces are a deterministic function of one trained classifier: reading it at more grid
points (or at more draft nodes) adds no evidence about what C2T's training learns, which is what the paper's readings
state. What varies is the training: so the claims read classifiers trained by C2T's recipe with different seeds on
the same trees (`seed_readings`; n = training seeds, at least `claims.MIN_UNITS` for a verdict), each reading one
number per classifier, judged by the 95% t interval over the seeds widened by ± tolerance (`seeds_rule`).
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, replace
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pandas as pd
import torch

from scipy import stats

from spectree.claims.claims import Evidence, claim, enough_units, halves_of, interval_rule, prompts_reading
from spectree.claims.diagnosis import PROMPTS, SEED, reading
from spectree.claims.verdicts import INCONCLUSIVE
from spectree.core.manifest import beside, digest, reuse_or_rebuild
from spectree.core.drafting import TOP_M
from spectree.core.paths import artifact_path
from spectree.strategies.c2t import (
    C2TClassifier,
    ClassifierTraining,
    fit_and_save,
    load_classifier,
    select_epoch,
)

H_MAX = float(np.log(TOP_M))  # ln M = 6.91 nats: the largest entropy of M probabilities
RANGES = {"P": (0.0, 1.0), "H": (0.0, H_MAX), "d": (0.0, 10.0)}  # d: Alg. 1's depth (first drafted layer 0)
# C2T Fig. 10's three panels: P as the paper's widely spaced surfaces; H at the paper's "low entropy (1 or 2)"
# (s0 l.437) and a high value below ln M; d = 0, 3, 7 (node depths 1, 4, 8: inside the logged trees' depths)
FIXED = {"P": (0.1, 0.5, 0.9), "H": (1.0, 2.0, 6.0), "d": (0.0, 3.0, 7.0)}
DEPTH_OFFSET = 1  # our node depth − Alg. 1's d (`Nodes`: root 0, first drafted layer 1)
TRAIN_FRACTION = 0.5  # of a logbook's prompts the classifier trains on; the rest pick the epoch


# --- the classifier -------------------------------------------------------------------------------------

def classifier_path(name: str) -> Path:
    return artifact_path("c2t", name)


def train_on_logbook(logdir: Path, cfg: ClassifierTraining = ClassifierTraining(),
                     train_fraction: float = TRAIN_FRACTION, pair: Optional[str] = None) -> tuple[Path, pd.DataFrame]:
    """Train C2T's classifier on a logbook's nodes (the first `train_fraction` of its prompts; the rest pick
    the epoch, or all prompts when there is only one) and save it as data/c2t/<logbook>-c2t-<hash>, the
    hash naming the training settings. Returns the path and the per-epoch table."""
    from spectree.replay.logbook import read_logbook

    logbook = read_logbook(logdir)
    n = max(1, int(len(logbook) * train_fraction))
    return fit_and_save(logbook[:n], logbook[n:] or logbook, classifier_path(trained_name(logdir, cfg)), cfg,
                        card={"logbook": logdir.name, **({"pair": pair} if pair else {})})


def made_for_another_pair(path: Path, pair: str) -> Optional[str]:
    """The pair a classifier file was trained for when its card names another than `pair` (its `pair`, or the
    logbook it was trained on, whose description starts with the pair: the shipped one's), else None."""
    card_path = Path(path).with_suffix(".json")
    try:
        card = json.loads(card_path.read_text()) if card_path.exists() else {}
    except ValueError:
        return None
    made = card.get("pair") or str(card.get("logbook", "")).split(" ")[0] or None
    if made is None or made == pair or not (card.get("pair") or " " in str(card.get("logbook", ""))):
        return None
    return made


def trained_name(logdir: Path, cfg: ClassifierTraining) -> str:
    return f"{Path(logdir).name}-c2t-{digest(asdict(cfg))[:8]}"


def outputs(model: C2TClassifier, P, H, d) -> tuple[np.ndarray, np.ndarray]:
    """(logit, confidence) of the classifier at arrays of P, H and Alg. 1's depth d (broadcast; the classifier
    reads our node depth d + DEPTH_OFFSET); features it does not use are ignored, so a P+H classifier is flat
    in d."""
    node_depth = np.asarray(d, dtype=np.float32) + DEPTH_OFFSET
    cols = {k: torch.as_tensor(np.asarray(v, dtype=np.float32)) for k, v in {"P": P, "H": H, "d": node_depth}.items()}
    cols = dict(zip(cols, torch.broadcast_tensors(*cols.values())))
    x = torch.stack([cols[f].flatten() for f in model.features], dim=-1)
    with torch.no_grad():
        logit = model(x).reshape(cols["P"].shape)
    return logit.numpy(), torch.sigmoid(logit).numpy()


# --- grids ----------------------------------------------------------------------------------------------

def random_points(n: int, seed: int = 0) -> pd.DataFrame:
    """n uniform random inputs: P ∈ [0, 1], H ∈ [0, ln M] floats, d ∈ 0..10 integers in Alg. 1's convention
    (C2T Fig. 9; the paper's H goes to 10, past ln M)."""
    gen = torch.Generator().manual_seed(seed)
    return pd.DataFrame({"P": torch.rand(n, generator=gen, dtype=torch.float64).numpy(),
                         "H": RANGES["H"][1] * torch.rand(n, generator=gen, dtype=torch.float64).numpy(),
                         "d": torch.randint(0, 11, (n,), generator=gen).numpy()})


def scatter_table(model: C2TClassifier, n: int = 1000, seed: int = 0) -> pd.DataFrame:
    """C2T Fig. 9: random points with logit, confidence and `colour` = min-max normalised logit."""
    pts = random_points(n, seed)
    logit, conf = outputs(model, pts.P, pts.H, pts.d)
    span = float(logit.max() - logit.min())
    return pts.assign(logit=logit, confidence=conf, colour=(logit - logit.min()) / span if span > 0 else 0.0)


def free_features(fixed: str) -> tuple[str, str]:
    return tuple(f for f in RANGES if f != fixed)  # type: ignore[return-value]


def surface_table(model: C2TClassifier, grid: int = 100, fixed_values: dict = FIXED) -> pd.DataFrame:
    """C2T Fig. 10: for each feature and each of its fixed values, the confidence over a grid×grid mesh of
    the other two (d interpolated between integers, as the paper's surfaces are). Long format: fixed,
    value, x (first free feature), y (second), confidence, logit; plus the P, H, d columns."""
    frames = []
    for fixed, values in fixed_values.items():
        fx, fy = free_features(fixed)
        xs, ys = (np.linspace(*RANGES[f], grid) for f in (fx, fy))
        X, Y = np.meshgrid(xs, ys, indexing="ij")
        for value in values:
            cols = {fixed: np.full_like(X, value), fx: X, fy: Y}
            logit, conf = outputs(model, cols["P"], cols["H"], cols["d"])
            frames.append(pd.DataFrame({"fixed": fixed, "value": value, "x_name": fx, "y_name": fy,
                                        "x": X.ravel(), "y": Y.ravel(), "P": cols["P"].ravel(), "H": cols["H"].ravel(),
                                        "d": cols["d"].ravel(), "logit": logit.ravel(), "confidence": conf.ravel()}))
    return pd.concat(frames, ignore_index=True)


def partial_dependence(model: C2TClassifier, points: pd.DataFrame, grid: int = 21) -> pd.DataFrame:
    """Mean confidence over `points` with one feature set to each of `grid` values across its range
    (Friedman's partial dependence); columns feature, value, confidence."""
    rows = []
    for feature, (lo, hi) in RANGES.items():
        for value in np.linspace(lo, hi, grid):
            cols = {f: points[f].to_numpy() for f in RANGES} | {feature: np.full(len(points), value)}
            rows.append({"feature": feature, "value": float(value),
                         "confidence": float(outputs(model, cols["P"], cols["H"], cols["d"])[1].mean())})
    return pd.DataFrame(rows)


def pd_ranges(pdep: pd.DataFrame) -> dict[str, float]:
    """max − min of each feature's partial-dependence curve: how far that feature alone moves F."""
    return {f: float(g.confidence.max() - g.confidence.min()) for f, g in pdep.groupby("feature", sort=False)}


def surface_gap(surf: pd.DataFrame, fixed: str, a: float, b: float, p_range: tuple[float, float]) -> float:
    """Mean confidence of the fixed=a surface minus the fixed=b surface over the mesh points with P in p_range."""
    rows = surf[(surf.fixed == fixed) & surf.P.between(*p_range)]
    return float(rows[rows.value == a].confidence.mean() - rows[rows.value == b].confidence.mean())


# --- verdicts -------------------------------------------------------------------------------------------

READINGS = ("p_dominance", "h_gain", "d_gap_low", "d_flattening")  # one number per classifier, one per claim


def surface_readings(model: C2TClassifier, points: pd.DataFrame, grid: int = 100, low_p: float = 0.2,
                     high_p: float = 0.8) -> dict[str, float]:
    """The paper's readings of Fig. 9/10 on one classifier, each a confidence difference: P's partial-dependence
    range minus the larger of H's and d's over `points` (`p_dominance`); F(H=6) − F(H=1) over the fixed-H meshes
    with P ≤ low_p (`h_gain`); F(d=0) − F(d=7) over the fixed-d meshes with P ≤ low_p (`d_gap_low`, Alg. 1's d) and
    with P ≥ high_p (`d_gap_high`); |d_gap_low| − |d_gap_high| (`d_flattening`); and the three ranges."""
    r = pd_ranges(partial_dependence(model, points))
    surf = surface_table(model, grid)
    (h_lo, *_, h_hi), (d_lo, *_, d_hi) = sorted(FIXED["H"]), sorted(FIXED["d"])
    d_low = surface_gap(surf, "d", d_lo, d_hi, (0.0, low_p))
    d_high = surface_gap(surf, "d", d_lo, d_hi, (high_p, 1.0))
    return {"p_dominance": r["P"] - max(r["H"], r["d"]), "h_gain": surface_gap(surf, "H", h_hi, h_lo, (0.0, low_p)),
            "d_gap_low": d_low, "d_gap_high": d_high, "d_flattening": abs(d_low) - abs(d_high),
            **{f"range_{f}": v for f, v in r.items()}}


def seeds_rule(values, tolerance: float, what: str, level: float = 0.95) -> Evidence:
    """A reading of classifiers trained with different seeds (one value each) against zero: the `level` t interval
    of its mean over the seeds (scipy ttest_1samp), widened by ± `tolerance` (a difference that small is no
    effect): holds when the widened interval lies above 0, does not hold when below, else inconclusive; n = seeds
    (one seed: the value ± tolerance, inconclusive under MIN_UNITS anyway)."""
    x = np.asarray(values, dtype=float)
    est = float(x.mean()) if len(x) else math.nan
    if len(x) >= 2 and np.ptp(x) > 0:
        lo, hi = stats.ttest_1samp(x, 0.0).confidence_interval(level)
    else:
        lo = hi = est
    halves = [float(x[h].mean()) for h in halves_of(len(x))] if len(x) >= 2 else ()  # each half of the seeds
    return interval_rule(est, lo - tolerance, hi + tolerance, 0.0, len(x), what, strict=True, unit="training seeds",
                         method=f"{level:.0%} t interval over training seeds, widened by ±{tolerance:g},",
                         halves=halves)


HEALTHY_P_RANGE = 0.05  # a classifier whose partial dependence on P spans less reads P hardly at all: a degenerate fit


def _healthy_reading(readings: pd.DataFrame, key: str, tolerance: float, what: str) -> dict:
    """The `diagnosis.SEED` reading: the claim re-read on the seeds whose classifier reads P at all (its P range ≥
    HEALTHY_P_RANGE; C2T's epoch rule, recall first, can choose a near all-positive epoch), where some are not; {}
    where every seed is healthy."""
    if "range_P" not in readings:
        return {}
    healthy = readings[readings.range_P >= HEALTHY_P_RANGE]
    if len(healthy) == len(readings):
        return {}
    if not len(healthy):
        return {SEED: reading(f"every one of the {len(readings)} seeds trained a degenerate classifier (P range < "
                              f"{HEALTHY_P_RANGE:g})", INCONCLUSIVE)}
    ev = enough_units(seeds_rule(healthy[key], tolerance, what))
    return {SEED: reading(f"{len(readings) - len(healthy)} of {len(readings)} seeds trained a degenerate classifier "
                          f"(P range < {HEALTHY_P_RANGE:g}); on the {len(healthy)} others: {ev.verdict} "
                          f"({_spread(healthy[key])})", ev.verdict, where=f"{len(healthy)} healthy seeds")}


def _spread(values) -> str:
    x = np.asarray(values, dtype=float)
    return f"{x.mean():+.3f} (seeds {x.min():+.3f} to {x.max():+.3f})" if len(x) > 1 else f"{x.mean():+.3f}"


def surface_claims(readings: pd.DataFrame, tolerance: float = 0.01, low_p: float = 0.2, high_p: float = 0.8,
                   shipped: Optional[dict] = None) -> list[dict]:
    """The paper's readings of Fig. 9/10 (`surface_readings`) over classifiers trained with different seeds, one
    row of `readings` each (n = training seeds), each judged by `seeds_rule`; `shipped`: the same readings of
    the classifier the notebooks use, printed beside (it is one unit of another training set, not counted):

    - P dominates: P's partial-dependence range minus the larger of H's and d's;
    - high H helps at low P: F(H=6) − F(H=1) over the fixed-H meshes with P ≤ low_p;
    - shallow helps at low P: F(d=0) − F(d=7) over the fixed-d meshes with P ≤ low_p (Alg. 1's d);
    - depth matters less at high P: that gap's size at P ≤ low_p minus its size at P ≥ high_p.
    """
    (h_lo, *_, h_hi), (d_lo, *_, d_hi) = sorted(FIXED["H"]), sorted(FIXED["d"])
    beside = (lambda key: f"; the shipped classifier {shipped[key]:+.3f}") if shipped else (lambda key: "")
    ranges = ", ".join(f"{f} {readings[f'range_{f}'].mean():.3f}" for f in RANGES)
    stated = {"p_dominance": "P's partial-dependence range − the larger of H's and d's",
              "h_gain": f"F(H={h_hi:g}) − F(H={h_lo:g}) at P ≤ {low_p:g}",
              "d_gap_low": f"F(d={d_lo:g}) − F(d={d_hi:g}) at P ≤ {low_p:g}",
              "d_flattening": f"|depth gap| at P ≤ {low_p:g} − |depth gap| at P ≥ {high_p:g}"}
    rule = {key: seeds_rule(readings[key], tolerance, what) for key, what in stated.items()}
    n = len(readings)
    seeds = {key: {PROMPTS: prompts_reading(enough_units(ev), "training seeds"),
                   **_healthy_reading(readings, key, tolerance, what)} for key, what, ev in
             ((k, w, rule[k]) for k, w in stated.items())}
    return [
        claim("joint probability P dominates the classifier (C2T Fig. 9/10)",
              "P has the greatest impact; the fixed-P surfaces are widely spaced",
              f"P's partial-dependence range − the larger of H's and d's: {_spread(readings.p_dominance)} over {n} "
              f"training seeds (mean ranges {ranges}){beside('p_dominance')}", rule["p_dominance"],
              key="c2t-fig10-p", readings=seeds["p_dominance"]),
        claim("high entropy raises confidence at low P (C2T Fig. 10, fixed H)",
              "at low P the high-entropy surface lies above the low-entropy ones",
              f"F(H={h_hi:g}) − F(H={h_lo:g}) = {_spread(readings.h_gain)} over {n} training seeds (mean over "
              f"P ≤ {low_p:g}, d ∈ [0, 10], Alg. 1's d){beside('h_gain')}", rule["h_gain"], key="c2t-fig10-entropy",
              readings=seeds["h_gain"]),
        claim("shallower depth raises confidence at low P (C2T Fig. 10, fixed d)",
              "at low P the surfaces diverge, shallower depths higher",
              f"F(d={d_lo:g}) − F(d={d_hi:g}) = {_spread(readings.d_gap_low)} over {n} training seeds (mean over "
              f"P ≤ {low_p:g}, H ∈ [0, {RANGES['H'][1]:.2f}]; Alg. 1's d, first drafted layer 0){beside('d_gap_low')}",
              rule["d_gap_low"], key="c2t-fig10-depth", readings=seeds["d_gap_low"]),
        claim("the depth gap shrinks from low P to high P (C2T Fig. 10, fixed d)",
              "the fixed-d surfaces coincide and flatten at high P (s0 l.437: \"indicating minimal effect of depth\")",
              f"|F(d={d_lo:g}) − F(d={d_hi:g})| at P ≤ {low_p:g} − at P ≥ {high_p:g}: "
              f"{_spread(readings.d_flattening)} over {n} training seeds{beside('d_flattening')}",
              rule["d_flattening"], key="c2t-fig10-depth-high-p", readings=seeds["d_flattening"]),
    ]


def surface_numbers(scatter: pd.DataFrame, pdep: pd.DataFrame, surf: pd.DataFrame) -> dict:
    """Key numbers for summary.json: output ranges, partial-dependence ranges, mean confidence per panel."""
    panels = surf.assign(confidence=surf.confidence.astype(float)).groupby(["fixed", "value"]).confidence.agg(
        ["mean", "min", "max"]).round(4)
    return {"logit_range": [round(float(scatter.logit.min()), 4), round(float(scatter.logit.max()), 4)],
            "confidence_range": [round(float(scatter.confidence.min()), 4), round(float(scatter.confidence.max()), 4)],
            "pd_range": {f: round(v, 4) for f, v in pd_ranges(pdep).items()},
            "surface_confidence": {f"{f}={v:g}": row.to_dict() for (f, v), row in panels.iterrows()}}


def hand_set_classifier(w_p: float, w_h: float, w_d: float, bias: float = 0.0,
                        features: Sequence[str] = ("P", "H", "d")) -> C2TClassifier:
    """A classifier whose logit is exactly bias + w_P·P + w_H·H + w_d·d (one hidden ReLU unit per sign of
    the linear form), for tests and for reading the verdicts on a known model."""
    w = {"P": w_p, "H": w_h, "d": w_d}
    model = C2TClassifier(tuple(features), hidden=2)
    lin = torch.tensor([w[f] for f in model.features])
    with torch.no_grad():
        model.net[0].weight.copy_(torch.stack([lin, -lin]))
        model.net[0].bias.zero_()
        model.net[2].weight.copy_(torch.tensor([[1.0, -1.0]]))
        model.net[2].bias.fill_(bias)
    return model.eval()


def get_classifier(name: str, log_cfg, prompts: str, cfg: ClassifierTraining = ClassifierTraining()
                   ) -> tuple[C2TClassifier, dict]:
    """data/c2t/<name> when it exists (and was made for `log_cfg.pair`); otherwise a classifier trained on the
    logbook of `prompts` under `log_cfg` (a `LogConfig`; `trained_classifier`). Returns the model and where it came
    from."""
    path, source = classifier_path(name), "shipped"
    other = made_for_another_pair(path, log_cfg.pair)
    if not path.exists() or other:
        why = f"{name} was trained for {other}, not {log_cfg.pair}" if other else f"{name} is missing"
        path, source = trained_classifier(log_cfg, prompts, cfg, why)
    card_path = path.with_suffix(".json")
    card = json.loads(card_path.read_text()) if card_path.exists() else {}
    history = training_history(path.stem)
    chosen = history[history.chosen].iloc[0] if len(history) else None
    return load_classifier(path), {
        "classifier": path.stem, "source": source, "training_nodes": card.get("nodes"),
        "training_positives": card.get("positives"), "epochs_run": len(history),
        "chosen_epoch": None if chosen is None else int(chosen.epoch),
        "chosen_recall": None if chosen is None else round(float(chosen.recall), 4),
        "chosen_positive_rate": None if chosen is None else round(float(chosen.positive_rate), 6),
        "stopped": card.get("stopped")}


def trained_classifier(log_cfg, prompts: str, cfg: ClassifierTraining = ClassifierTraining(), why: str = ""
                       ) -> tuple[Path, str]:
    """(path, where it came from): C2T's classifier trained by `cfg` on the logbook of `prompts` under `log_cfg`
    (`train_on_logbook`), cached under `trained_name` — logging first only if that logbook is not on disk yet. Its
    manifest records the logbook's manifest and the training settings; it is an internal cache keyed by that
    content, so one trained on anything else is trained again (seconds), not refused."""
    from spectree.prompts import parse_prompt_spec
    from spectree.replay.logbook import logbook_dir, logbook_manifest, logbook_tag, notebook_logbook

    parsed = parse_prompt_spec(prompts)
    logdir = logbook_dir(log_cfg, logbook_tag(prompts))
    path = classifier_path(trained_name(logdir, cfg))
    note = f" ({why})" if why else ""
    source = f"trained earlier on {logdir.name}{note}"

    def build() -> Path:
        nonlocal source
        notebook_logbook(prompts, log_cfg)  # resumable; logged again if made from anything else
        source = f"trained now on {logdir.name}{note}"
        return train_on_logbook(logdir, cfg, pair=log_cfg.pair)[0]

    wanted = {"logbook": logbook_manifest(parsed, log_cfg), "training": asdict(cfg), "train_fraction": TRAIN_FRACTION}
    reuse_or_rebuild(beside(path), wanted, lambda: path if path.exists() else None, build)
    return path, source


def seed_readings(log_cfg, prompts: str, seeds: Sequence[int], points: pd.DataFrame,
                  cfg: ClassifierTraining = ClassifierTraining(), grid: int = 100) -> pd.DataFrame:
    """The claims' units: one classifier per seed, trained by C2T's recipe (`cfg` with that seed: initial weights,
    the negatives drawn each epoch) on the same trees (`trained_classifier`: the logbook's first half of prompts;
    the rest picks the epoch), and its `surface_readings` over `points` and a grid×grid mesh. One row per seed,
    with the epoch kept and its held-out recall. The seeds train in `core.workers` processes (untimed, each
    independent of the others), on the logbook written once here first."""
    from spectree.core.workers import map_jobs
    from spectree.replay.logbook import notebook_logbook

    notebook_logbook(prompts, log_cfg)  # before the workers: none of them logs it
    jobs = [(log_cfg, prompts, replace(cfg, seed=int(seed)), points, grid) for seed in seeds]
    return pd.DataFrame(map_jobs(_seed_row, jobs, desc="classifier seeds"))


def _seed_row(log_cfg, prompts: str, cfg: ClassifierTraining, points: pd.DataFrame, grid: int) -> dict:
    """One seed's row of `seed_readings` (a module-level job for `core.workers`)."""
    path, _ = trained_classifier(log_cfg, prompts, cfg)
    history = training_history(path.stem)
    chosen = history[history.chosen] if len(history) else history
    return {"seed": cfg.seed, "classifier": path.stem,
            "epoch": int(chosen.epoch.iloc[0]) if len(chosen) else None,
            "recall": float(chosen.recall.iloc[0]) if len(chosen) else math.nan,
            **surface_readings(load_classifier(path), points, grid)}


def training_history(name: str) -> pd.DataFrame:
    """The per-epoch table on the card data/c2t/<name>.json (epoch, training loss, held-out recall and positive
    rate), `chosen` marking the epoch C2T's rule kept (`select_epoch`; on a card without it, best recall then
    least positive rate); empty when the card has no table."""
    card_path = classifier_path(name).with_suffix(".json")
    card = json.loads(card_path.read_text()) if card_path.exists() else {}
    history = pd.DataFrame(card.get("history", []))
    if history.empty:
        return history.assign(chosen=pd.Series(dtype=bool))
    chosen = card.get("chosen", {}).get("epoch") or select_epoch(history)
    return history.assign(chosen=history.epoch == chosen)
