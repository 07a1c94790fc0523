"""C2T's classifier training (s0 l.348–354): held-out whole trees, the epoch chosen by recall then positive
rate, training until the held-out recall plateaus, and the card that records the curve."""
import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from spectree.strategies import c2t
from spectree.strategies.c2t import (ClassifierTraining, fit_and_save, hold_out_trees, recall_plateaued,
                                     select_epoch, train_classifier)


def logged_nodes(n_trees: int, nodes_per_tree: int, seed: int) -> pd.DataFrame:
    """Synthetic logged nodes whose label is learnable: accepted exactly when P > 0.6 and d ≤ 2 (~4% positive)."""
    rng = np.random.default_rng(seed)
    n = n_trees * nodes_per_tree
    joint = rng.random(n) ** 3
    depth = rng.integers(1, 9, n)
    return pd.DataFrame({"position": np.repeat(np.arange(n_trees), nodes_per_tree), "node": np.tile(
        np.arange(1, nodes_per_tree + 1), n_trees), "joint": joint, "entropy_topm": 7 * rng.random(n),
        "depth": depth, "on_path": (joint > 0.6) & (depth <= 2)})


def test_select_epoch_prefers_higher_recall_then_the_least_positive_rate_among_similar_recall():
    history = pd.DataFrame({"epoch": [1, 2, 3, 4], "recall": [0.30, 0.80, 0.795, 0.50],
                            "positive_rate": [0.01, 0.20, 0.05, 0.01]})
    assert select_epoch(history) == 2  # strictly by recall
    assert select_epoch(history, similar_recall=0.01) == 3  # 0.795 is "similar": its θ is four times smaller
    assert select_epoch(history, similar_recall=0.6) == 1  # everything similar: least θ, then the earliest


def test_recall_plateau_waits_for_patience_and_for_the_curve_to_start_rising():
    rising = [0.0, 0.1, 0.2, 0.3, 0.4]
    assert not recall_plateaued(rising, patience=2, min_gain=0.01)
    flat = [0.0, 0.3, 0.5, 0.502, 0.501]
    assert recall_plateaued(flat, patience=2, min_gain=0.01) and not recall_plateaued(flat, 0, 0.01)
    assert not recall_plateaued([0.0] * 10, patience=2, min_gain=0.01)  # not started: no plateau yet


def test_held_out_trees_are_whole_trees():
    table = logged_nodes(20, 30, seed=0).assign(prompt=lambda t: np.where(t.position % 2 == 0, "a", "b"))
    train, held = hold_out_trees(table, 0.3, seed=1)
    trees = lambda t: set(zip(t.prompt, t.position))  # noqa: E731
    assert trees(train).isdisjoint(trees(held)) and len(train) + len(held) == len(table)
    assert len(held) % 30 == 0 and 0 < len(held) < len(table)


def test_training_stops_at_the_recall_plateau_and_keeps_the_chosen_epoch():
    train, valid = logged_nodes(40, 150, seed=0), logged_nodes(20, 150, seed=1)
    cfg = ClassifierTraining(epochs=400, patience=10, min_gain=0.005, similar_recall=0.01)
    model, history = train_classifier(train, valid, cfg)
    assert len(history) < cfg.epochs and history.recall.max() > 0.9  # converged well before the cap
    assert list(history.columns) == ["epoch", "loss", "valid_loss", "recall", "positive_rate", "chosen"]
    chosen = history[history.chosen]
    assert len(chosen) == 1 and int(chosen.epoch.iloc[0]) == select_epoch(history.drop(columns="chosen"), 0.01)
    pred = model.confidence(valid).numpy() > 0.5
    on_path = valid.on_path.to_numpy()
    assert (pred & on_path).sum() / on_path.sum() == pytest.approx(float(chosen.recall.iloc[0]))
    assert pred.mean() == pytest.approx(float(chosen.positive_rate.iloc[0]))


def test_the_held_out_logits_in_slices_are_the_whole_forwards(monkeypatch):
    """Each epoch reads the held-out nodes in slices of EVAL_ROWS (no 60 MB allocation per epoch): the same logits,
    also for a count that is no multiple of the slice and for none."""
    torch.manual_seed(0)
    model = c2t.C2TClassifier().eval()
    x = model.inputs(logged_nodes(7, 1001, seed=3))
    monkeypatch.setattr(c2t, "EVAL_ROWS", 1000)
    with torch.no_grad():
        assert torch.equal(c2t.held_out_logits(model, x), model(x)) and len(x) % 1000
        assert c2t.held_out_logits(model, x[:0]).shape == (0,)


def test_card_records_the_held_out_trees_and_the_curve(tmp_path):
    torch.manual_seed(0)
    logbook = [SimpleNamespace(nodes=pd.concat([pd.DataFrame({"node": [0], "position": [p], "joint": [1.0],
                                                              "entropy_topm": [0.0], "depth": [0],
                                                              "on_path": [True]}) for p in range(40)]
                                               + [logged_nodes(40, 100, seed=k)], ignore_index=True),
                               prompt=SimpleNamespace(key=f"toy/{k}")) for k in range(2)]
    cfg = ClassifierTraining(epochs=30, patience=5)
    _, history = fit_and_save(logbook, None, tmp_path / "c.safetensors", cfg, valid_share=0.25)
    card = json.loads((tmp_path / "c.json").read_text())
    assert card["validation"]["trees"] > 0 and card["validation"]["nodes"] % 100 == 0  # whole trees, root excluded
    assert card["nodes"] + card["validation"]["nodes"] == 2 * 40 * 100
    assert [h["epoch"] for h in card["history"]] == history.epoch.tolist()
    assert {"loss", "recall", "positive_rate"} <= set(card["history"][0])
    assert card["chosen"]["epoch"] == int(history[history.chosen].epoch.iloc[0])
    assert card["stopped"].startswith(f"after epoch {len(history)}")
