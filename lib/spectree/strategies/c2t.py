"""C2T (Alg. 1): a tiny classifier F(P, H, d) over a draft node's joint probability P, the top-M entropy H of the
distribution it was drawn from and its depth d predicts whether the target accepts it; nodes whose confidence
exceeds β join the tree (C2T §4.2; the classifier is trained on logged full trees).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

import numpy as np
import pandas as pd
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save
from torch import nn

from spectree.core.errors import SpectreeError
from spectree.core.paths import (
    artifact_path,
    atomic_write_bytes,
    atomic_write_text,
    check_safetensors,
)
from spectree.core.policy import Policy, Rows, spec_field

FEATURES = {"P": "joint", "H": "entropy_topm", "d": "depth"}  # C2T's names → node columns


class C2TClassifier(nn.Module):
    """F(P, H, d) = sigmoid(W2 · relu(W1 · x)), hidden size 48 by default."""

    def __init__(self, features: tuple[str, ...] = ("P", "H", "d"), hidden: int = 48):
        super().__init__()
        unknown = set(features) - set(FEATURES)
        if unknown or not features:
            raise SpectreeError(f"C2T features must be a non-empty subset of {sorted(FEATURES)}, got {features}")
        self.features, self.hidden = tuple(features), hidden
        self.net = nn.Sequential(nn.Linear(len(features), hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def inputs(self, nodes: Any) -> torch.Tensor:
        """[n, len(features)] float features of the nodes (anything with the node columns as attributes: a
        policy's `Rows`, `Nodes`, a DataFrame of logged nodes)."""
        return torch.stack([torch.from_numpy(np.array(getattr(nodes, FEATURES[f]), dtype=np.float32))
                            for f in self.features], dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)  # logits

    def confidence(self, nodes: Any) -> torch.Tensor:
        """[n] the classifier's confidence C in [0, 1] that each node is accepted: the same `net`, evaluated in numpy
        (a few dozen nodes per layer while drafting, where torch's per-op cost is most of the work)."""
        w1, b1, w2, b2 = self._numpy_weights()
        x = np.stack([np.asarray(getattr(nodes, FEATURES[f]), dtype=np.float32) for f in self.features], axis=-1)
        logit = np.maximum(x @ w1.T + b1, 0.0) @ w2[0] + b2[0]  # [n]
        return torch.from_numpy(1.0 / (1.0 + np.exp(-logit)))

    def _numpy_weights(self) -> tuple[np.ndarray, ...]:
        """(W1, b1, W2, b2) as numpy views of the parameters (shared memory: training and loading update them in
        place), made once per device placement."""
        first, _, last = self.net
        params = (first.weight, first.bias, last.weight, last.bias)
        where = tuple(p.data_ptr() for p in params)
        cached = self.__dict__.get("_views")
        if cached is None or cached[0] != where:
            cached = self.__dict__["_views"] = (where, tuple(p.detach().cpu().numpy() for p in params))
        return cached[1]


@dataclass(frozen=True)
class ClassifierTraining:
    """C2T's training (s0 l.350–354): negative sampling, Adam 1e-3, BCE; after every epoch recall and positive
    rate θ at threshold 0.5 on held-out trees, and the epoch of the best recall, then the smallest θ. The paper
    trains 10 epochs on 8.9M nodes (s0 l.348, l.352); our logbooks hold ~1,000× fewer accepted nodes, so
    training runs until the held-out recall plateaus, `epochs` at most."""

    features: tuple[str, ...] = ("P", "H", "d")
    hidden: int = 48
    epochs: int = 300  # at most (the paper: 10)
    lr: float = 1e-3
    batch: int = 256
    negatives_per_positive: float = 3.0  # negative sampling: rejected nodes kept per accepted node
    patience: int = 30  # stop once the best held-out recall has not risen by > min_gain in this many epochs (0: never)
    min_gain: float = 0.005  # recall gain that still counts as rising
    similar_recall: float = 0.01  # epochs within this of the best recall are "similar" (s0 l.354): least θ wins
    seed: int = 0


def node_table(logbooks: list) -> pd.DataFrame:
    """All non-root logged nodes of the given LoggedPrompts, with the `on_path` label and the `prompt` key (a
    tree is one (prompt, position))."""
    frames = [lp.nodes[lp.nodes.node > 0].assign(prompt=lp.prompt.key) for lp in logbooks]
    return pd.concat(frames, ignore_index=True)


def hold_out_trees(table: pd.DataFrame, share: float, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, held out): a seeded random `share` of the logged trees, each tree whole (the paper evaluates
    tree by tree, "batch size 1011", s0 l.352); at least one tree on each side when there are two."""
    tree = table.groupby(["prompt", "position"], sort=False).ngroup().to_numpy()  # [n] tree id of each node
    held = np.random.default_rng(seed).random(tree.max() + 1) < share  # [trees]
    if len(held) > 1 and (held.all() or not held.any()):
        held[:] = False
        held[-1] = True
    return table[~held[tree]], table[held[tree]]


def select_epoch(history: pd.DataFrame, similar_recall: float = 0.0) -> int:
    """C2T's selection rule (s0 l.354): "priority should be given to models with significantly higher recall.
    Among models with similar recall, choose the one with a smaller θ" — the epochs within `similar_recall` of
    the best held-out recall, and among them the smallest positive rate (then the earliest)."""
    similar = history[history.recall >= history.recall.max() - similar_recall]
    return int(similar.sort_values(["positive_rate", "epoch"], kind="stable").epoch.iloc[0])


def recall_plateaued(recalls: list[float], patience: int, min_gain: float) -> bool:
    """True when the best recall of the last `patience` epochs is no more than `min_gain` above the best before
    them (patience 0: never); a curve still at 0 has not started rising, so it has not plateaued."""
    if patience <= 0 or len(recalls) <= patience or max(recalls) == 0:
        return False
    return max(recalls[-patience:]) <= max(recalls[:-patience]) + min_gain


def train_classifier(train: pd.DataFrame, valid: pd.DataFrame, cfg: ClassifierTraining = ClassifierTraining()
                     ) -> tuple[C2TClassifier, pd.DataFrame]:
    """Train on logged nodes (negative sampling drawn afresh each epoch, Adam, BCE); after every epoch measure
    the mean training loss, and on `valid` (held-out trees, every node) the BCE, the recall and the positive rate
    at threshold 0.5; stop at `cfg.epochs` or when the recall plateaus (`recall_plateaued`), and keep the epoch
    `select_epoch` picks. Returns the chosen model and the per-epoch table (`chosen` marks its epoch)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a 3→48→1 network: more threads only wait on each other (4× slower on a busy host)
    try:
        return _train_classifier(train, valid, cfg)
    finally:
        torch.set_num_threads(threads)


def _train_classifier(train: pd.DataFrame, valid: pd.DataFrame, cfg: ClassifierTraining
                      ) -> tuple[C2TClassifier, pd.DataFrame]:
    rng = np.random.default_rng(cfg.seed)
    torch.manual_seed(cfg.seed)
    pos, neg = train[train.on_path], train[~train.on_path]
    n_neg = min(len(neg), int(cfg.negatives_per_positive * max(len(pos), 1)))
    model = C2TClassifier(cfg.features, cfg.hidden)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    loss_fn = nn.BCEWithLogitsLoss()
    vx, vy = model.inputs(valid), torch.tensor(valid.on_path.to_numpy(), dtype=torch.bool)
    xp, xn = model.inputs(pos), model.inputs(neg)  # [n_pos, f], [n_neg_all, f]
    y = torch.cat([torch.ones(len(pos)), torch.zeros(n_neg)])  # [n_pos + n_neg] labels of every epoch's sample
    history, states = [], {}
    for epoch in range(1, cfg.epochs + 1):
        x = torch.cat([xp, xn[torch.from_numpy(rng.choice(len(neg), n_neg, replace=False))]])  # fresh negatives
        order = torch.randperm(len(y))
        model.train()
        losses = []
        for i in range(0, len(y), cfg.batch):
            idx = order[i:i + cfg.batch]
            loss = loss_fn(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        model.eval()
        with torch.no_grad():
            logits = held_out_logits(model, vx)
        pred = logits > 0  # sigmoid > 0.5
        history.append({"epoch": epoch, "loss": float(np.mean(losses)),
                        "valid_loss": float(loss_fn(logits, vy.float())) if len(vy) else float("nan"),
                        "recall": float((pred & vy).sum() / max(int(vy.sum()), 1)),
                        "positive_rate": float(pred.float().mean()) if len(vy) else 0.0})
        states[epoch] = {k: v.clone() for k, v in model.state_dict().items()}
        if recall_plateaued([h["recall"] for h in history], cfg.patience, cfg.min_gain):
            break
    table = pd.DataFrame(history)
    chosen = select_epoch(table, cfg.similar_recall)
    model.load_state_dict(states[chosen])
    return model.eval(), table.assign(chosen=table.epoch == chosen)


EVAL_ROWS = 1 << 14  # held-out nodes per forward: 3 MB of hidden activations, reused from the heap


def held_out_logits(model: C2TClassifier, x: torch.Tensor) -> torch.Tensor:
    """model(x) [n] in slices of EVAL_ROWS rows: the same logits (each row's are its own), without the allocation of
    every held-out node's hidden layer at once (300k nodes: 60 MB, mapped and unmapped by malloc every epoch, whose
    page faults were three quarters of a training run's time on the 2-core host: docs/history.md)."""
    return torch.cat([model(x[i:i + EVAL_ROWS]) for i in range(0, len(x), EVAL_ROWS)]) if len(x) else model(x)


def save_classifier(model: C2TClassifier, path: Path, card: Optional[dict] = None) -> None:
    payload = save({k: v.contiguous() for k, v in model.state_dict().items()},
                   metadata={"features": ",".join(model.features), "hidden": str(model.hidden)})
    atomic_write_bytes(path, payload)
    if card is not None:
        atomic_write_text(path.with_suffix(".json"), json.dumps(card, indent=1, default=str))


def fit_and_save(train: list, valid: Optional[list], path: Path, cfg: ClassifierTraining = ClassifierTraining(),
                 card: Optional[dict] = None, valid_share: float = 0.2) -> tuple[Path, pd.DataFrame]:
    """Train the classifier on the nodes of the logged prompts `train` (`valid`'s trees pick the epoch; None →
    a random `valid_share` of `train`'s trees, held out whole) and save it at `path` with a card: prompts, nodes,
    positives, the held-out trees, the settings, the per-epoch table (loss, recall, positive rate), the chosen
    epoch and why training stopped. Returns (path, per-epoch table)."""
    table = node_table(train)
    if valid is None:
        table, valid_table = hold_out_trees(table, valid_share, cfg.seed)
        held = f"{valid_share:.0%} of the training prompts' trees, held out whole (seed {cfg.seed})"
    else:
        valid_table = node_table(valid)
        held = "the trees of " + ", ".join(lp.prompt.key for lp in valid)
    model, history = train_classifier(table, valid_table, cfg)
    last = int(history.epoch.iloc[-1])
    stopped = (f"recall plateaued (best not above +{cfg.min_gain:g} in the last {cfg.patience} epochs)"
               if last < cfg.epochs else f"{cfg.epochs} epochs (the cap)")
    chosen = history[history.chosen].iloc[0]
    save_classifier(model, path, card={**(card or {}), "prompts": [lp.prompt.key for lp in train],
                                       "nodes": len(table), "positives": int(table.on_path.sum()),
                                       "validation": {"held_out": held,
                                                      "trees": int(valid_table.groupby(["prompt", "position"]).ngroups),
                                                      "nodes": len(valid_table),
                                                      "positives": int(valid_table.on_path.sum())},
                                       "training": asdict(cfg), "stopped": f"after epoch {last}: {stopped}",
                                       "chosen": {"epoch": int(chosen.epoch), "recall": float(chosen.recall),
                                                  "positive_rate": float(chosen.positive_rate)},
                                       "history": history.drop(columns="chosen").to_dict("records")})
    return path, history


def load_classifier(path: Path) -> C2TClassifier:
    """The classifier saved at `path`, loaded once per process (again only if the file changes)."""
    if not path.exists():
        raise SpectreeError(f"C2T classifier {path} is missing: train it (docs/training.md, C2T classifier)")
    stat = path.stat()
    return _load(path.resolve(), stat.st_mtime_ns, stat.st_size)


@lru_cache(maxsize=16)
def _load(path: Path, mtime_ns: int, size: int) -> C2TClassifier:
    check_safetensors(path)
    with safe_open(str(path), framework="pt") as f:
        meta = f.metadata() or {}
    try:
        model = C2TClassifier(tuple(meta["features"].split(",")), int(meta["hidden"]))
        model.load_state_dict(load_file(str(path)))
    except (KeyError, RuntimeError) as err:
        raise SpectreeError(f"{path} is not a C2T classifier checkpoint ({err})") from err
    return model.eval()


@dataclass
class C2T(Policy):
    """`c2t_policy`, C2T Alg. 1: each node of a layer offers its K likeliest children (line 6, N ← topK(M_d(N)):
    §4.2.2's "calculate confidence only for the TopK tokens with the highest generation probability", per node:
    "taking the TopK for each node ... resulting in K² probabilities", appendix C Proof-2); those whose confidence
    C = F(P, H, d) exceeds β join the tree and generate the next layer (§4.2.1); with `topk` > 0 only the topk
    most confident of each layer do (§4.2.2's second pruning, line 21 "extend N or topK(N) to T"). The paper uses
    one TopK for both, 15 in its main tables (d_max 10). The classifier is data/c2t/<classifier>.safetensors, or
    `model`."""

    beta: float = 0.5  # β
    K: int = 15  # children scored per node (first TopK)
    d_max: int = 10
    topk: int = 15  # second pruning: at most this many nodes per layer, the most confident (0 = off)
    classifier: str = "smollm2-edd"  # data/c2t/<classifier>.safetensors
    model: Optional[C2TClassifier] = spec_field(default=None)  # the classifier itself (loaded from `classifier` if None)

    name = "c2t"
    features = frozenset({"draft_prob", "entropy_topm"})  # P, and H: the entropy over the top-M probabilities
    probabilities = ("beta",)

    def __post_init__(self):
        super().__post_init__()  # validates β before loading anything
        if self.model is None:
            self.model = load_classifier(artifact_path("c2t", self.classifier))

    def layer_cap(self) -> Optional[int]:
        return self.topk or None  # the topk most confident of a layer; without the second pruning, β alone

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        conf = self.model.confidence(cand).numpy()  # [c] C of every offered child: each node's K likeliest
        keep = conf > self.beta
        if self.topk:  # second pruning: the topk most confident of this layer, per tree
            keep &= cand.top(np.where(keep, conf, -1.0), self.topk)
        return keep


__all__ = ["C2TClassifier", "ClassifierTraining", "train_classifier", "save_classifier", "load_classifier",
           "node_table", "hold_out_trees", "select_epoch", "recall_plateaued", "fit_and_save", "C2T"]
