"""Block sparsity of the tree attention mask (DySpec App. C: Table 5, Fig. 7–9).

A FlashAttention-style kernel works on b×b tiles (b = 32) of the [n, prefix + n] mask the verifier uses and
can skip a tile that is all False. DySpec renumbers the tree nodes in DFS pre-order (`DraftTree.dfs_order`)
so every root path is a run of nearby indices and far fewer tiles are non-zero than in the original order,
the order the tree was generated in: for DySpec's greedy heap (Alg. 1) the order its nodes are popped; for our
logged trees the layer-by-layer order `grow_tree` drafts and stores them in. This module counts those tiles,
grows random trees the way DySpec's greedy heap does (in its pop order, with breadth-first order beside it),
and times masked attention in both orders, with the dense SDPA our decoder calls (it computes every tile,
whatever the mask) and with a small block-sparse loop that skips empty tiles.
"""
from __future__ import annotations

import heapq
import statistics
import time
from functools import partial
from typing import Callable, Hashable, Iterable, Optional, Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from spectree.core.tree import NODE_FIELDS, DraftTree
from spectree.core.treeattn import additive_mask, tree_allowed

BLOCK = 32  # DySpec's tile size (shared-memory limit of attention kernels)


# --- counting -------------------------------------------------------------------------------------------

def nonzero_blocks(allowed: torch.Tensor, block: int = BLOCK) -> torch.Tensor:
    """bool [⌈rows/b⌉, ⌈cols/b⌉]: which b×b tiles of the bool mask `allowed` hold any True (edge tiles are
    partial, padded with False)."""
    rows, cols = allowed.shape
    nr, nc = -(-rows // block), -(-cols // block)
    padded = torch.zeros(nr * block, nc * block, dtype=torch.bool, device=allowed.device)
    padded[:rows, :cols] = allowed
    return padded.view(nr, block, nc, block).any(dim=3).any(dim=1)


def block_count(allowed: torch.Tensor, block: int = BLOCK) -> int:
    """Number of non-zero b×b tiles of a bool mask (what a block-sparse kernel has to compute)."""
    return int(nonzero_blocks(allowed, block).sum())


def verify_mask(tree: DraftTree, prefix: int) -> torch.Tensor:
    """bool [n, prefix + n]: the mask of the target's verification forward as `CachedLM.feed_tree` builds it
    (every tree node, root included, after `prefix` cached tokens; slot prefix + i holds node i)."""
    n = len(tree)
    return tree_allowed(tree.parents.numpy(), np.arange(n), prefix + np.arange(n), prefix, prefix + n)


# --- trees ----------------------------------------------------------------------------------------------

def permute(tree: DraftTree, order: torch.Tensor) -> DraftTree:
    """The same tree with node order[i] renumbered i; `order` must list parents before children
    (BFS or DFS pre-order), as every `DraftTree` does."""
    new_index = torch.empty(len(tree), dtype=torch.long)
    new_index[order] = torch.arange(len(tree))
    part = tree.take(order)
    part.parents = torch.where(part.parents >= 0, new_index[part.parents.clamp(min=0)], part.parents)
    return DraftTree(**part.columns(), prefix_len=tree.prefix_len, dists=tree.dists,
                     dist_row=None if tree.dist_row is None else tree.dist_row[order])


def dfs_tree(tree: DraftTree) -> DraftTree:
    """DySpec App. C reordering: the tree renumbered in DFS pre-order."""
    return permute(tree, tree.dfs_order())


def bfs_tree(tree: DraftTree) -> DraftTree:
    """The tree renumbered layer by layer (stable by depth: within a layer, the original order)."""
    return permute(tree, torch.argsort(tree.depth, stable=True))


def random_tree(n: int, generator: torch.Generator, skew: float = 2.0) -> DraftTree:
    """A random draft-like tree of n nodes (root included), grown as DySpec's greedy heap (Alg. 1) grows one.

    Each heap slot is (v, parent, residual mass m) with v = P(parent)·m. Popping the largest v adds a child
    that takes a share u ~ Beta(skew, 1) of m (u = U^(1/skew), U uniform from `generator`), then pushes its
    sibling slot v·(1−u) and its own child slot P(child). Larger `skew` → the sampled token takes more mass →
    deeper, chain-like trees. Nodes are numbered in the order the heap pops them (DySpec's generation order,
    the "original order" of its Table 5): the slot values v are non-increasing along the indices.
    """
    if n < 1:
        raise ValueError(f"a tree has at least its root, got n={n}")
    parents, joint, probs = [-1], [1.0], [1.0]
    heap: list[tuple[float, int, int, float]] = [(-1.0, 0, 0, 1.0)]  # (−v, tie-break, parent, m)
    uniforms = torch.rand(n, generator=generator, dtype=torch.float64).tolist()
    while len(parents) < n:
        _, _, p, mass = heapq.heappop(heap)
        u = uniforms[len(parents)] ** (1.0 / skew)
        node = len(parents)
        parents.append(p)
        probs.append(mass * u)
        joint.append(joint[p] * mass * u)
        heapq.heappush(heap, (-joint[p] * mass * (1 - u), 2 * node, p, mass * (1 - u)))
        heapq.heappush(heap, (-joint[node], 2 * node + 1, node, 1.0))
    depth = [0] * n
    for i in range(1, n):  # parents precede children in pop order
        depth[i] = depth[parents[i]] + 1
    cols = {f: [0.0] * n for f in NODE_FIELDS}
    cols.update(tokens=list(range(n)), parents=parents, depth=depth, draft_prob=probs, joint=joint,
                rank=[0] * n, confidence=probs)
    return DraftTree(**DraftTree.from_columns(cols).columns(), prefix_len=1)


def tree_depth(tree: DraftTree) -> int:
    return int(tree.depth.max())


# --- block-count tables ---------------------------------------------------------------------------------

def count_orders(tree: DraftTree, prefixes: Iterable[int], block: int = BLOCK) -> list[dict]:
    """Non-zero tiles of the verification mask per prefix length in the tree's own (generation) order
    `original`, in DFS order, and breadth-first (`bfs`, for reference); ratio = original ÷ DFS."""
    orders = {"original": tree, "dfs": dfs_tree(tree), "bfs": bfs_tree(tree)}
    rows = []
    for prefix in prefixes:
        counts = {name: block_count(verify_mask(t, prefix), block) for name, t in orders.items()}
        rows.append({"nodes": len(tree), "depth": tree_depth(tree), "prefix": int(prefix), **counts,
                     "ratio": counts["original"] / counts["dfs"]})
    return rows


def random_tree_blocks(sizes: Sequence[int], trees_per_size: int, seed: int = 0, skew: float = 2.0,
                       prefix: int = 0, block: int = BLOCK) -> pd.DataFrame:
    """DySpec Table 5's block counts: `trees_per_size` random trees of each size, one row per tree."""
    gen = torch.Generator().manual_seed(seed)
    rows = [{"tree": t, **row} for size in sizes for t in range(trees_per_size)
            for row in count_orders(random_tree(int(size), gen, skew), [prefix], block)]
    return pd.DataFrame(rows)


def logged_tree_blocks(trees: Sequence[DraftTree], prefixes: Sequence[int], block: int = BLOCK) -> pd.DataFrame:
    """DySpec Fig. 9's block counts: real (logged) draft trees after prefixes of each length."""
    return pd.DataFrame([{"tree": t, **row} for t, tree in enumerate(trees)
                         for row in count_orders(tree, prefixes, block)])


def sample_logged_trees(logbook: Sequence, n_trees: int, seed: int = 0) -> list[DraftTree]:
    """Up to `n_trees` logged trees (LoggedPrompt.tree) drawn without replacement with a seeded generator."""
    keys = [(i, pos) for i, lp in enumerate(logbook) for pos in sorted(lp.nodes.position.unique())]
    pick = torch.randperm(len(keys), generator=torch.Generator().manual_seed(seed))[:n_trees].sort().values
    return [logbook[keys[k][0]].tree(int(keys[k][1])) for k in pick.tolist()]


def summarise_blocks(table: pd.DataFrame, by: str) -> pd.DataFrame:
    """Mean block counts per `by` value; ratio = mean original ÷ mean DFS (DySpec's reading)."""
    cols = {c: (c, "mean") for c in ("nodes", "depth", "original", "dfs", "bfs") if c != by and c in table}
    out = table.groupby(by).agg(trees=("tree", "size"), **cols).reset_index()
    return out.assign(ratio=out.original / out.dfs)


# --- attention timing -----------------------------------------------------------------------------------

Plan = list[tuple[int, int, torch.Tensor, torch.Tensor]]


def sparse_plan(allowed: torch.Tensor, block: int = BLOCK) -> Plan:
    """Per row tile: (row start, row end, key columns of its non-zero tiles, the mask restricted to them).
    A block-sparse kernel builds this once per tree and reuses it in every layer."""
    nz, cols_total = nonzero_blocks(allowed, block), allowed.shape[1]
    offsets = torch.arange(block, device=allowed.device)
    plan = []
    for i in range(nz.shape[0]):
        r0, r1 = i * block, min((i + 1) * block, allowed.shape[0])
        cols = (nz[i].nonzero().flatten()[:, None] * block + offsets).flatten()
        cols = cols[cols < cols_total]
        plan.append((r0, r1, cols, allowed[r0:r1, cols]))
    return plan


def block_sparse_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: Plan) -> torch.Tensor:
    """Attention that only computes non-zero tiles: per row tile, SDPA over the keys of its non-zero tiles.
    q: [B, H, n, D]; k, v: [B, H, S, D]; equals dense masked SDPA (every row sees at least itself)."""
    out = torch.empty_like(q)
    for r0, r1, cols, mask in plan:
        out[:, :, r0:r1] = F.scaled_dot_product_attention(q[:, :, r0:r1], k[:, :, cols], v[:, :, cols], attn_mask=mask)
    return out


def dense_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """SDPA with the additive float mask `bias` ([1, 1, n, S], `treeattn.additive_mask`), as our decoder
    passes it to the Llama attention: every tile is computed, whatever the mask."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias)


def repeat_seconds(fns: dict[Hashable, Callable[[], object]], reps: int, device: torch.device,
                   warmup: int = 2) -> dict[Hashable, list[float]]:
    """Wall time of each function in each of `reps` rounds after `warmup` untimed rounds; the functions take
    turns within a round, in alternating directions, so that load on a shared machine and cache warmth hit
    them alike (CUDA synchronised)."""
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    times: dict[Hashable, list[float]] = {name: [] for name in fns}
    for round_ in range(warmup + reps):
        for name in (list(fns) if round_ % 2 == 0 else list(fns)[::-1]):
            sync()
            t0 = time.perf_counter()
            fns[name]()
            sync()
            if round_ >= warmup:
                times[name].append(time.perf_counter() - t0)
    return times


def default_device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def time_orders(sizes: Sequence[int], seed: int = 0, skew: float = 2.0, prefix: int = 0, heads: int = 9,
                head_dim: int = 64, reps: int = 12, block: int = BLOCK,
                device: Optional[torch.device] = None) -> pd.DataFrame:
    """DySpec Table 5's timings: for one random tree per size, the dense masked SDPA and the block-sparse
    loop in the original and DFS order (q [1, heads, n, head_dim], keys prefix + n): the median of `reps`
    rounds, the fastest and slowest round (`*_min`, `*_max`) and every round (`*_rounds`, ms; the four calls take
    turns within a round, so round i of one order is paired with round i of the other: the claims' units)."""
    device = device or default_device()
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for size in sizes:
        tree = random_tree(int(size), gen, skew)
        s = prefix + len(tree)
        q, k, v = (torch.randn(1, heads, n, head_dim, generator=gen).to(device) for n in (len(tree), s, s))
        masks = {order: verify_mask(t, prefix).to(device) for order, t in (("original", tree), ("dfs", dfs_tree(tree)))}
        plans = {order: sparse_plan(m, block) for order, m in masks.items()}
        fns = {**{("dense", o): partial(dense_attention, q, k, v, additive_mask(m, q.dtype)) for o, m in masks.items()},
               **{("sparse", o): partial(block_sparse_attention, q, k, v, p) for o, p in plans.items()}}
        secs = repeat_seconds(fns, reps, device)
        rows += [{"nodes": len(tree), "prefix": prefix, "order": order, "blocks": block_count(masks[order], block),
                  **{f"{kernel}_ms{part}": 1e3 * f(secs[(kernel, order)]) for kernel in ("dense", "sparse")
                     for part, f in (("", statistics.median), ("_min", min), ("_max", max))},
                  **{f"{kernel}_rounds": [round(1e3 * t, 5) for t in secs[(kernel, order)]]
                     for kernel in ("dense", "sparse")},
                  "reps": reps, "device": device.type} for order in masks]
    return pd.DataFrame(rows)


def timing_ratios(times: pd.DataFrame) -> pd.DataFrame:
    """Per tree size: original ÷ DFS for the block count and both kernels' times, and dense ÷ block-sparse median
    time in DFS order (`dense_over_sparse`, what the speed claim reads)."""
    wide = times.pivot_table(index="nodes", columns="order", values=["blocks", "dense_ms", "sparse_ms"])
    out = pd.DataFrame({col: wide[col]["original"] / wide[col]["dfs"] for col in ("blocks", "dense_ms", "sparse_ms")})
    return out.assign(dense_over_sparse=wide["dense_ms"]["dfs"] / wide["sparse_ms"]["dfs"])


__all__ = ["BLOCK", "nonzero_blocks", "block_count", "verify_mask", "permute", "dfs_tree", "bfs_tree", "random_tree",
           "count_orders", "random_tree_blocks", "logged_tree_blocks", "sample_logged_trees", "summarise_blocks",
           "sparse_plan", "block_sparse_attention", "dense_attention", "repeat_seconds", "time_orders", "timing_ratios"]
