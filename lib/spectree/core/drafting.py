"""Growing a `DraftTree` layer by layer: the draft model scores a frontier with tree attention, each
frontier node offers its top-K (greedy) or K sampled-without-replacement (stochastic) children with
their features, and a policy (`spectree.strategies`) decides which to keep. Policies never touch a model.
"""
from __future__ import annotations

import time
from typing import Optional

import numpy as np
import torch
from transformers import PreTrainedModel

from spectree.core.errors import SpectreeError, TreeTooLarge
from spectree.core.families import attention_layout
from spectree.core.graphs import graph_cache, graphed
from spectree.core.offers import append_offers
from spectree.core.policy import OPTIONAL_FEATURES, Lazy, NodeTable, Policy, Rows, computed_columns, grow
from spectree.core.sampling import (
    Sampling,
    chunk_maxima,
    rank_in_row,
    row_topk,
    sample_without_replacement,
    softmax_entropy,
    top_values_chunk,
    topm_entropy,
)
from spectree.core.tree import DraftTree, root_columns
from spectree.core.treeattn import (cache_len, forward_with_mask, keep_slots, slab_cache, synchronize,
                                    tree_allowed, truncate)

TOP_M = 1000  # C2T: entropy over the top-M probabilities


class CachedLM:
    """A causal LM plus the KV cache of the committed tokens it has been fed.

    `committed` counts the cache slots holding committed tokens; tree nodes fed after them are
    temporary until `rollback` (drop them) or `keep` (keep an accepted path).
    """

    def __init__(self, model: PreTrainedModel):
        self.model = model
        # (tokens fed, seconds) of every forward: the rest of drafting is tree construction (`core.decode`)
        self.forwards: list[tuple[int, float]] = []
        self.reset()

    def _forward(self, inputs, positions, allowed, output_hidden_states, last_only=False):
        t0 = time.perf_counter()
        out = forward_with_mask(self.model, self.cache, inputs, positions, allowed, output_hidden_states, last_only)
        synchronize(self.model)  # on CUDA: the forward's own time, not charged to tree construction's next copy
        self.forwards.append((int(inputs.shape[0]), time.perf_counter() - t0))
        return out

    @property
    def kept_ids(self) -> Optional[torch.Tensor]:
        """The token ids of a reduced LM head (`drafts.edd.ReducedHead`; every other logit is lower), else None."""
        return getattr(getattr(self.model, "lm_head", None), "kept_ids", None)

    def reset(self) -> None:
        attention_layout(self.model)  # a family the tree path cannot serve: refused here, in one line
        self.cache = graph_cache(self.model, self) if graphed(self.model) else slab_cache(self.model.config)
        self.committed = 0
        self.slots: Optional[np.ndarray] = None  # [n] cache slot of every tree node fed (−1: not fed)

    def feed_chain(self, tokens: torch.Tensor, output_hidden_states: bool = False, last_only: bool = False):
        """Append committed entries (token ids [k] or embeddings [k, H]), causally; returns the model
        output (logits [1, k, V]; [1, 1, V], the last entry's, when `last_only`)."""
        k = int(tokens.shape[0])
        if cache_len(self.cache) != self.committed:
            raise SpectreeError(f"feed_chain after {cache_len(self.cache) - self.committed} uncommitted tree entries: "
                                "rollback or keep_path first")
        out = self._forward(tokens, self.committed + torch.arange(k), None, output_hidden_states, last_only)
        self.committed += k
        return out

    def feed_nodes(self, parents: np.ndarray, nodes: np.ndarray, tokens: torch.Tensor, positions: torch.Tensor,
                   output_hidden_states: bool = False):
        """Feed nodes [m] of a tree whose parents are `parents` [n] (their ancestors already fed or committed)
        with the ancestor mask; tokens and positions: [m]."""
        n, start, m = len(parents), cache_len(self.cache), len(nodes)
        if self.slots is None:
            self.slots = np.full(n, -1, dtype=np.int64)
        elif len(self.slots) < n:
            self.slots = np.concatenate([self.slots, np.full(n - len(self.slots), -1, dtype=np.int64)])
        self.slots[nodes] = start + np.arange(m)
        allowed = tree_allowed(parents, nodes, self.slots, self.committed, start + m)
        return self._forward(tokens, positions, allowed, output_hidden_states)

    def feed_tree(self, tree: DraftTree, nodes: torch.Tensor, output_hidden_states: bool = False):
        """Feed tree nodes [m] (their ancestors already fed or committed) with the ancestor mask."""
        return self.feed_nodes(tree.parents.numpy(), nodes.numpy(), tree.tokens[nodes], tree.position_ids()[nodes],
                               output_hidden_states)

    def rollback(self) -> None:
        """Forget every tree node fed since the last commit."""
        truncate(self.cache, self.committed)
        self.slots = None

    def rewind(self, committed: int) -> None:
        """Back to the first `committed` committed entries (a shared prompt's, `decode.Prefill`): the entries after
        them are dropped, those before were never written since."""
        truncate(self.cache, committed)
        self.committed, self.slots = committed, None

    def keep_path(self, path: torch.Tensor) -> None:
        """Commit the tree nodes `path` (already fed, in order) and drop the other tree nodes."""
        keep_slots(self.cache, self.committed, torch.from_numpy(self.slots[path.numpy()]))
        self.committed += int(path.shape[0])
        self.slots = None


def host(t: torch.Tensor) -> np.ndarray:
    """A small tensor's values in numpy, copied from the device when there is one (one synchronisation)."""
    return t.cpu().numpy()


def child_candidates(frontier: Rows, logits: torch.Tensor, k: int, sampling: Sampling,
                     generator: Optional[torch.Generator], features: frozenset = OPTIONAL_FEATURES,
                     kept: Optional[torch.Tensor] = None) -> tuple[dict[str, np.ndarray], Optional[torch.Tensor]]:
    """Up to k children per frontier node, with features from the raw (T = 1) draft distribution — but for `p`
    (`draft_prob`, `joint`) when sampling: a drawn child's p is its probability under the warped distribution it
    was drawn from, the R[y] with which DySpec's Alg. 1 values the slots it samples y from (s2 l.147–149, its draft
    at temperature 0.6, l.192); entropy and confidence stay the raw distribution's (what Gunjur and CAPE read).

    frontier: [f] rows of a `NodeTable` (their `idx`, `depth`, and `joint` when "draft_prob" is wanted); logits:
    [f, V] draft logits there. Greedy: the top-k tokens. Stochastic: k tokens sampled without replacement from the
    warped distribution (`sample_without_replacement`), in sample order — the order multi-branch verification
    replays. Only the columns of the features named in `features` (those the policy reads) are computed
    (`core.policy.computed_columns`): each costs passes over the vocabulary. `kept`: ≥ TOP_M column ids that hold
    every row's top M (a reduced draft head's tokens, see `draft_tree`), so the top-M entropy reads only them.
    Returns (the candidates' columns [c], `parents` = frontier rows; warped distributions [f, V], None when greedy).

    Greedy, the passes over the vocabulary run where the logits are (on a GPU: top-k, softmax and entropy on the
    device) and only a few numbers per child cross to the host; sampling draws on the host, with the CPU generator.
    """
    logits = logits.float() if sampling.greedy else logits.float().cpu()  # [f, V]; a few numbers per child in numpy
    f = logits.shape[0]
    wants_p, wants_h = "draft_prob" in features, "entropy" in features
    topm = "entropy_topm" in features and kept is None
    shared = chunk_maxima(logits, top_values_chunk(logits.shape[1], TOP_M)) if topm else None  # [f, C], read twice
    if sampling.greedy:
        warped, drawn = None, None
        top, tok = row_topk(logits, k, maxima=shared)  # [f, k] descending, where the logits are
        cols = {"rank": np.arange(f * k) % k}
    else:
        warped = sampling.probs(logits)
        tok, drawn = sample_without_replacement(warped, k, generator)  # [f, k] in sample order
        cols = {"rank": rank_in_row(logits, logits.gather(-1, tok)).numpy().ravel()} if "rank" in features else {}
        drawn = drawn.numpy().ravel()
    cols.update(tokens=host(tok).ravel(), parents=frontier.idx.repeat(k), depth=(frontier.depth + 1).repeat(k),
                source=np.zeros(f * k, np.int64), match_len=np.zeros(f * k, np.int64))  # proposed by the draft
    if wants_p or wants_h:
        probs = torch.softmax(logits, -1)  # [f, V] the raw (T = 1) distribution: one fused pass
        p_max = probs.gather(-1, tok[:, :1])[:, 0] if sampling.greedy else probs.amax(-1)  # [f] the top token's
        if wants_h:
            top_logit = top[:, 0] if sampling.greedy else logits.amax(-1)  # [f]
            cols["entropy"] = host(softmax_entropy(probs, logits, top_logit, p_max)).repeat(k)
        if wants_p:
            p = host((probs if sampling.greedy else warped).gather(-1, tok))  # [f, k]: of the offered distribution
            cols.update(draft_prob=p.ravel(), joint=(frontier.joint[:, None] * p).ravel(),
                        confidence=host(p_max).repeat(k))
    row = np.arange(f).repeat(k)  # [c] each candidate's frontier row
    if drawn is not None:  # a row with fewer than k tokens of positive probability offers fewer children
        cols, row = {name: col[drawn] for name, col in cols.items()}, row[drawn]
    if "entropy_topm" in features:  # per parent row, only where the policy reads it (C2T: its K likeliest children)
        def entropy_topm(off: np.ndarray) -> np.ndarray:
            rows, inverse = np.unique(row[off], return_inverse=True)
            pick = slice(None) if len(rows) == f else torch.from_numpy(rows).to(logits.device)
            block, maxima = logits[pick], None if shared is None else shared[pick]  # [r, V], [r, C]
            return host(topm_entropy(block if kept is None else block[:, kept.to(block.device)], TOP_M,
                                     maxima))[inverse]
        cols["entropy_topm"] = Lazy(entropy_topm)
    return cols, warped


def offer_sampling(policy: Policy, sampling: Sampling) -> Sampling:
    """How the draft offers a policy its children under `sampling`: drawn without replacement from the warped
    draft distribution when the policy is `sampling_safe` (multi-branch verification, DySpec Alg. 3, then keeps
    the target distribution), else — or when its paper proposes the top tokens (`proposes_top`) — the draft's
    top-K: greedy offers, each verified at T > 0 as a fixed proposal (accepted with the target's residual
    probability, else removed from it: lossless for any tree, as EAGLE's and SGLang's sampling verification). The
    one place this is decided: live drafting and the χ² tests call it."""
    return sampling if policy.sampling_safe and not policy.proposes_top else Sampling()


def draft_tree(drafter: CachedLM, root_token: int, root_logits: torch.Tensor, prefix_len: int, policy: Policy,
               sampling: Sampling, generator: Optional[torch.Generator] = None) -> DraftTree:
    """Grow one draft tree under `policy` with the draft model (root = last committed token, root_logits: [V]):
    `core.policy.grow` over a table of one tree, where every child the draft offers (and the policy's `limit` lets
    through: `core.offers.append_offers`) becomes a row and the policy's kept rows form the tree. The draft offers
    as `offer_sampling` says."""
    sampling = offer_sampling(policy, sampling)
    table = NodeTable(root_columns(root_token, computed_columns(policy.features, sampling.greedy)),
                      np.zeros(1, dtype=np.int64), 1)
    expanded: list[tuple[np.ndarray, torch.Tensor]] = []  # (frontier [f], warped draft dists [f, V]) per layer
    kept_ids = drafter.kept_ids  # a reduced head's tokens: every other logit is lower
    kept_ids = kept_ids if kept_ids is not None and len(kept_ids) >= TOP_M else None  # on the logits' device

    def offer(frontier: Rows) -> np.ndarray:
        n_kept, n_offers = int(frontier.growth.grown.sum()), policy.layer_offers(len(frontier))
        if policy.max_nodes is not None and n_kept + n_offers > policy.max_nodes:
            why = policy.oversized() or f"{policy.spec} outgrew the {policy.max_nodes:,}-node guard (Policy.max_nodes)"
            if not policy.fixed_size:  # the setting allows it; how far the tree grows depends on the draft
                why += f"; this draft got there ({n_offers:,} candidates offered on top of {n_kept:,} nodes)"
            raise TreeTooLarge(why)
        if frontier.depth[0] == 0:
            logits = root_logits[None]  # [1, V]
        else:
            logits = drafter.feed_nodes(table.cols["parents"], frontier.idx, torch.from_numpy(frontier.tokens),
                                        torch.from_numpy(prefix_len - 1 + frontier.depth)).logits[0]  # [f, V]
        cand, warped = child_candidates(frontier, logits, policy.width(frontier), sampling, generator,
                                        policy.features, kept_ids)
        if warped is not None:
            expanded.append((frontier.idx, warped))
        return append_offers(frontier, policy, cand)  # those the policy's `limit` lets through

    growth = grow(table, policy, offer)
    drafter.rollback()
    tree = kept_tree(table, growth.kept, prefix_len, expanded)
    tree.offered = len(table) - 1  # every child offered the policy: the size of tree construction's work
    return tree


def kept_tree(table: NodeTable, kept: np.ndarray, prefix_len: int,
              expanded: list[tuple[np.ndarray, torch.Tensor]]) -> DraftTree:
    """The `DraftTree` of a one-tree table's kept rows (bool [N], root-connected), re-indexed; `expanded`: the
    warped draft distributions [f, V] of each layer's frontier rows [f] (stochastic drafting), none when greedy."""
    parents = table.cols["parents"]
    kept = kept.copy()
    kept[0] = True
    bad = kept & (parents >= 0) & ~kept[np.maximum(parents, 0)]
    if bad.any():
        raise SpectreeError(f"the kept nodes are not root-connected: nodes {np.flatnonzero(bad).tolist()} lack a parent")
    rows = np.flatnonzero(kept)
    new_index = np.full(len(table) + 1, -1)  # [N + 1]: a root's parent −1 reads the last entry, −1
    new_index[rows] = np.arange(len(rows))
    cols = table.node_fields(rows)
    cols["parents"] = new_index[cols["parents"]]
    tree = DraftTree(**{f: torch.from_numpy(c) for f, c in cols.items()}, prefix_len=prefix_len)
    if expanded:  # rows only for the expanded nodes
        tree.dists = torch.cat([warped for _, warped in expanded])  # [m, V]
        dist_row = np.full(len(table), -1)
        dist_row[np.concatenate([frontier for frontier, _ in expanded])] = np.arange(len(tree.dists))
        tree.dist_row = torch.from_numpy(dist_row[rows])
    return tree


def draft_model(draft) -> PreTrainedModel:
    """The model inside a drafter (EDD's, a `ModelDrafter`'s), or the draft model itself."""
    return getattr(getattr(draft, "lm", None), "model", draft)


class ModelDrafter:
    """A standalone draft LM (layer-skip, VDM): its cache holds the committed tokens, root included."""

    needs_hidden = False  # this draft does not read the target's hidden states

    def __init__(self, model: PreTrainedModel):
        self.lm = CachedLM(model)

    def start(self, prompt_ids: list[int], hidden: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Prefill the prompt; returns the draft logits [V] at the root (the prompt's last token)."""
        self.lm.reset()
        return self.lm.feed_chain(torch.tensor(prompt_ids), last_only=True).logits[0, -1]

    def advance(self, new_tokens: list[int], hidden: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Commit the tokens of the last step (accepted + bonus); returns the logits [V] at the new root."""
        return self.lm.feed_chain(torch.tensor(new_tokens), last_only=True).logits[0, -1]

    def draft(self, root_token: int, root_logits: torch.Tensor, prefix_len: int, policy: Policy,
              sampling: Sampling, generator: Optional[torch.Generator] = None) -> DraftTree:
        return draft_tree(self.lm, root_token, root_logits, prefix_len, policy, sampling, generator)
