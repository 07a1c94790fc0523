"""The data behind the analysis notebooks (04–07): one shared logbook and, at a temperature T > 0, the draft
and target distributions at T along the target's greedy output. Statistics live in `spectree.analysis`.

The shared logbook (`ANALYSIS_TREE`) stores, at every position of the target's greedy output, the top-20
children of every node on the target's greedy path and of every node of the draft's rank-0 chain, down to depth
10 (`replay.logtree`'s shape "path"): every draft token a greedy verifier could examine in a tree of K ≤ 20 and
depth ≤ 10 (ranks 1..20 of C2T Fig. 2 at every depth: its verdicts read depth 1, the paper's "single forward",
`stats.at_depth`, with every depth pooled beside), the length-10 draft chain of EDD Fig. 3b, and nothing
else, so it is cheap to log. Its folder is
keyed by the config (`LogConfig.key`), so the four notebooks log it once and resume it after interruption.
`logbook_tokens` turns it into the token table that `spectree.analysis` describes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd
import torch

from spectree.core.errors import SpectreeError
from spectree.core.paths import artifact_path
from spectree.prompts import chat_ids
from spectree.replay.logbook import LogConfig, LoggedPrompt, notebook_logbook, read_logbook

TOKEN_COLUMNS = ("prompt", "dataset", "position", "depth", "rank", "token", "p", "joint", "entropy",
                 "entropy_topm", "confidence", "accept", "target_prob", "examined", "chain")  # see spectree.analysis
ANALYSIS_TREE = {"K": 20, "d_max": 10, "beam": 1, "b_env": 1, "d_env": 1, "shape": "path"}  # greedy path, rank-0 chain
TOP_M = 1000  # C2T's top-M entropy, as in drafting


def prompt_spec(dataset: str, n_prompts: int) -> str:
    """'mtbench+humaneval', 40 → 'mtbench:40+humaneval:40'; parts that carry a count keep it
    ('mtbench:8+sharegpt', 4 → 'mtbench:8+sharegpt:4'), prompt files too ('jsonl:q.jsonl', 4 → 'jsonl:q.jsonl:4';
    'jsonl:q.jsonl:2' stays)."""
    from spectree.prompt_files import is_jsonl, split_part

    if isinstance(n_prompts, bool) or not isinstance(n_prompts, int) or n_prompts < 1:
        raise SpectreeError(f"n_prompts must be a positive integer, got {n_prompts!r}")
    parts = [p.strip() for p in str(dataset).split("+")]
    counted = [split_part(p)[1] is not None if is_jsonl(p) else ":" in p for p in parts]
    return "+".join(p if c else f"{p}:{n_prompts}" for p, c in zip(parts, counted))  # checked when it is parsed


def analysis_logbook(pair: str, prompts: str, max_new_tokens: int, models: Any = None
                     ) -> tuple[list[LoggedPrompt], Path]:
    """The shared logbook of `prompts` (a prompt spec; `notebook_logbook`: logged if missing or made from
    anything else, resumable), and its folder."""
    cfg = LogConfig(pair=pair, max_new_tokens=max_new_tokens, **ANALYSIS_TREE)
    out = notebook_logbook(prompts, cfg, models=models)
    return read_logbook(out), out


def logbook_tokens(logbook: Sequence[LoggedPrompt]) -> pd.DataFrame:
    """The draft tokens of a logbook (list of `LoggedPrompt`) that a greedy verifier examines (parent on the
    target's greedy path) plus every node of the rank-0 chain (for path acceptance); root rows dropped."""
    frames = []
    for i, lp in enumerate(logbook):
        if lp.nodes.empty:  # a generation that ended at once
            continue
        nd = lp.nodes.sort_values(["position", "node"], ignore_index=True)
        par, node = nd.parents.to_numpy(), nd.node.to_numpy()
        rank, depth = nd["rank"].to_numpy(), nd.depth.to_numpy()
        row = np.arange(len(nd))
        parent = np.where(par >= 0, row - node + par, 0)  # a position's nodes are rows start .. start + n - 1
        chain = par < 0
        for d in range(1, int(depth.max(initial=0)) + 1):  # parents precede children: fill depth by depth
            at = depth == d
            chain[at] = (rank[at] == 0) & chain[parent[at]]
        examined = (par >= 0) & nd.on_path.to_numpy()[parent]
        keep = (par >= 0) & (examined | chain)
        frames.append(pd.DataFrame({
            "prompt": i, "dataset": lp.prompt.dataset, "position": nd.position.to_numpy()[keep],
            "depth": depth[keep], "rank": rank[keep], "token": nd.tokens.to_numpy()[keep],
            "p": nd.draft_prob.to_numpy(np.float64)[keep], "joint": nd.joint.to_numpy(np.float64)[keep],
            "entropy": nd.entropy.to_numpy(np.float64)[keep],
            "entropy_topm": nd.entropy_topm.to_numpy(np.float64)[keep],
            "confidence": nd.confidence.to_numpy(np.float64)[keep],
            "accept": nd.on_path.to_numpy(np.float64)[keep],
            "target_prob": nd.target_prob.to_numpy(np.float64)[keep],
            "examined": examined[keep], "chain": chain[keep]}))
    if not frames:
        return pd.DataFrame(columns=list(TOKEN_COLUMNS))
    return pd.concat(frames, ignore_index=True)


@torch.inference_mode()
def temperature_tokens(logbook: list[LoggedPrompt], pair: str, temperature: float, top: int = 20,
                       models: Any = None) -> pd.DataFrame:
    """Depth-1 token table at temperature T: at every logged position (context = the target's greedy output),
    the top-`top` tokens x of the draft distribution D at T, with p = D(x), the target's T(x) at T and
    accept = min(1, T(x) / D(x)), the probability that stochastic verification accepts x if it is drafted.
    `entropy` is D's (at T); one extra column, `entropy_raw`, is the entropy of the draft's raw distribution
    softmax(logits) (T = 1): what B(H) and the entropy cutoffs read live (`core.drafting.child_candidates`)."""
    from spectree.core.decode import walk_continuation
    from spectree.core.sampling import entropy, topm_entropy
    from spectree.models.loading import load_pair

    if not temperature > 0:
        raise SpectreeError(f"temperature_tokens needs a temperature > 0, got {temperature}")
    target, draft, tok = models or load_pair(pair)
    frames = []
    for i, lp in enumerate(logbook):
        ids = chat_ids(tok, lp.prompt.text)
        drafts, targets = [], []
        for prefix, root_logits, _, target_logits in walk_continuation(target, draft, ids, lp.continuation, lp.n_valid):
            drafts.append(root_logits.float().cpu())
            targets.append(target_logits[prefix - 1])  # row prefix - 1 predicts the token at prefix
        if not drafts:
            continue
        raw = torch.stack(drafts)  # [n, V] the draft's logits
        d_logits = raw / temperature
        d = torch.softmax(d_logits, dim=-1)
        t = torch.softmax(torch.stack(targets).float() / temperature, dim=-1)
        p, x = d.topk(top, dim=-1)  # [n, top]
        tp = t.gather(-1, x)
        n = len(drafts)
        per_position = {"entropy": entropy(d), "entropy_topm": topm_entropy(d_logits, TOP_M), "confidence": p[:, 0],
                        "entropy_raw": entropy(torch.softmax(raw, dim=-1))}
        frames.append(pd.DataFrame({
            "prompt": i, "dataset": lp.prompt.dataset, "position": np.repeat(np.arange(n), top), "depth": 1,
            "rank": np.tile(np.arange(top), n), "token": x.flatten().numpy(),
            "p": p.flatten().double().numpy(), "joint": p.flatten().double().numpy(),
            **{k: np.repeat(v.double().numpy(), top) for k, v in per_position.items()},  # [n] → [n * top]
            "accept": torch.clamp(tp / p, max=1.0).flatten().double().numpy(),
            "target_prob": tp.flatten().double().numpy(), "examined": True,
            "chain": np.tile(np.arange(top) == 0, n)}))
    return pd.concat(frames, ignore_index=True) if frames else logbook_tokens([])


def token_table(pair: str, prompts: str, max_new_tokens: int, temperature: float = 0.0, models: Any = None
                ) -> tuple[pd.DataFrame, Path]:
    """(token table, logbook folder): T = 0 → the logbook's tokens with greedy labels (all depths); T > 0 →
    `temperature_tokens` (depth 1) along the same greedy output."""
    if temperature < 0:
        raise SpectreeError(f"temperature must be >= 0, got {temperature}")
    logbook, folder = analysis_logbook(pair, prompts, max_new_tokens, models)
    if temperature == 0:
        return logbook_tokens(logbook), folder
    return temperature_tokens(logbook, pair, temperature, ANALYSIS_TREE["K"], models), folder


def c2t_classifier_confidence(tokens: pd.DataFrame, pair: str, folder: Optional[Path] = None
                              ) -> tuple[Optional[np.ndarray], str]:
    """C2T's classifier output F(P, H, d) for every row of a token table, from the classifier of `pair`: the
    shipped data/c2t/<tag>.safetensors, else the newest data/c2t/<tag>-*.safetensors (`tag`: `pairs.pair_tag`),
    else the newest whose card names `pair` (02_tree_strategies writes it). A classifier trained for another pair
    is never used. Returns (confidences or None, the classifier's name or why there is none)."""
    import json

    from spectree.models.pairs import pair_tag
    from spectree.strategies.c2t import FEATURES, load_classifier

    tag = pair_tag(pair)
    folder = folder or artifact_path("c2t", tag).parent
    shipped = folder / f"{tag}.safetensors"

    def card_pair(f: Path) -> Optional[str]:
        try:
            return json.loads(f.with_suffix(".json").read_text()).get("pair")
        except (OSError, ValueError, AttributeError):
            return None
    files = sorted(folder.glob(f"{tag}-*.safetensors")) or [
        f for f in sorted(folder.glob("*.safetensors")) if card_pair(f) == pair]
    if not shipped.exists() and not files:
        return None, (f"no C2T classifier for pair {pair} in {folder} (notebook 02_tree_strategies trains one on "
                      f"the pair's logbook)")
    path = shipped if shipped.exists() else max(files, key=lambda f: f.stat().st_mtime)
    model = load_classifier(path)
    x = torch.tensor(tokens[[FEATURES[f] for f in model.features]].to_numpy(np.float32))
    with torch.no_grad():
        return torch.sigmoid(model(x)).numpy().astype(np.float64), path.stem
