"""The policy interface, and `grow`: the one layer loop that builds draft trees under a policy.

A policy decides from node features only and never touches a model. It decides over a batch of nodes that
carry a tree id: live drafting grows one tree (every id 0), replay grows every logged tree of a logbook at once.
So each strategy is written once, in numpy, and replays at full speed with no further work.

Layer by layer, `grow` asks an `Offer` for up to K children of every frontier node (the draft model's top-K or
samples when live, the logged children in replay), the policy's `select` keeps some, its `expand` says which
of those are offered children next, up to depth d_max; `finalize` may then prune the grown trees to
root-connected subtrees (e.g. rerank to the top N). Live drafting offers only the children the policy's `limit`
lets through (`core.offers.append_offers`): a wide K (DySpec's uncapped Alg. 1) then offers a layer as many
candidates as the policy can keep, not K per node.
"""
from __future__ import annotations

import math
import typing
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Callable, ClassVar, Optional, Union

import numpy as np

from spectree.core.errors import SpectreeError
from spectree.core.groups import mass_before, sibling_order, top_in_groups
from spectree.core.tree import LONG_FIELDS, NODE_FIELDS

# node features that cost passes over the vocabulary, and the NODE_FIELDS columns each gives: "draft_prob" is the
# draft's log-partition pass (a node's probability, its path's joint probability, its parent's top probability);
# "rank" a sampled token's place in its row (free under greedy drafting, where it is the offer order)
FEATURE_COLUMNS = {"draft_prob": ("draft_prob", "joint", "confidence"), "entropy": ("entropy",),
                   "entropy_topm": ("entropy_topm",), "rank": ("rank",)}
OPTIONAL_FEATURES = frozenset(FEATURE_COLUMNS)


def computed_columns(features: frozenset, greedy: bool) -> tuple[str, ...]:
    """The NODE_FIELDS columns live drafting computes for a policy reading `features` (`child_candidates`)."""
    wanted = set(features) | ({"rank"} if greedy else set())
    return tuple(f for f in NODE_FIELDS if not any(f in cols and name not in wanted
                                                    for name, cols in FEATURE_COLUMNS.items()))


@dataclass(frozen=True)
class Lazy:
    """A column of appended rows computed only at the rows a policy reads (live drafting: C2T's top-M entropy is
    wanted only where its classifier looks). `fn`: offsets into the appended block [r] → values [r]; the values
    must not depend on which other rows are asked for, so live drafting equals replay."""

    fn: Callable[[np.ndarray], np.ndarray]


@dataclass
class NodeTable:
    """Feature columns (numpy, [N]) of the nodes of one or many draft trees: NODE_FIELDS (live drafting: those the
    policy reads, `computed_columns`), with `parents` as row indices (−1 at a root), plus `tree` [N], each row's
    tree id. A tree's rows come root first, in offer order. Read columns with `column` (it computes `Lazy` ones)."""

    cols: dict[str, np.ndarray]
    tree: np.ndarray
    n_trees: int
    pending: dict[str, list[tuple[int, np.ndarray, Lazy]]] = field(default_factory=dict, init=False)  # (start, done, fn)

    def __len__(self) -> int:
        return len(self.tree)

    def append(self, cols: dict[str, Union[np.ndarray, Lazy]]) -> np.ndarray:
        """Add child rows (every column of this table, [m] or `Lazy`; parents are rows of this table), each to its
        parent's tree; returns their row indices."""
        start, m = len(self), len(cols["tokens"])
        tree = self.tree[np.asarray(cols["parents"])]
        for f, c in cols.items():
            if isinstance(c, Lazy):
                self.pending.setdefault(f, []).append((start, np.zeros(m, bool), c))
        self.cols = {f: np.concatenate([self.cols[f], np.full(m, np.nan, self.cols[f].dtype) if isinstance(cols[f], Lazy)
                                        else np.asarray(cols[f], dtype=self.cols[f].dtype)]) for f in self.cols}
        self.tree = np.concatenate([self.tree, tree])
        return np.arange(start, start + m)

    def column(self, name: str, rows: np.ndarray) -> np.ndarray:
        """Column `name` at `rows`, computing the `Lazy` entries among them first."""
        for start, done, lazy in self.pending.get(name, ()):
            off = rows[(rows >= start) & (rows < start + len(done))] - start
            off = off[~done[off]]
            if len(off):
                self.cols[name][start + off] = lazy.fn(off)
                done[off] = True
        return self.cols[name][rows]

    def node_fields(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """Every NODE_FIELDS column at `rows`, those not computed filled in (NaN; rank −1)."""
        return {f: self.column(f, rows) if f in self.cols else np.full(len(rows), -1 if f in LONG_FIELDS else np.nan,
                                                                       dtype=np.int64 if f in LONG_FIELDS else np.float32)
                for f in NODE_FIELDS}


def unread(name: str) -> Exception:
    """The error for reading column `name` that is not there: a node feature the policy did not declare (one clear
    line naming the feature to declare), else an AttributeError."""
    if name in NODE_FIELDS:
        feature = next(f for f, cols in FEATURE_COLUMNS.items() if name in cols)
        return SpectreeError(f"node feature `{name}` was not computed: a policy that reads it must name {feature!r} "
                             "in its `features`")
    return AttributeError(name)


class Rows:
    """Some rows of a growing `NodeTable`, as a policy sees them.

    Attributes by name give their feature columns (numpy [n]): tokens, parents (table rows), depth, draft_prob,
    joint (P), entropy (H, nats), entropy_topm, rank, confidence; `tree` [n] is each row's tree id and
    `n_trees` how many trees there are. A policy that needs memory along paths keeps an integer per node with
    `set_state(name, values)` (integers or floats) and reads it back with `state(name)` / `parent_state(name)` (0
    at a root)."""

    def __init__(self, growth: "Growth", idx: Optional[np.ndarray] = None, mask: Optional[np.ndarray] = None):
        self.growth, self._idx, self._mask = growth, idx, mask  # rows by index, or by a mask resolved when read
        self._cols: dict[str, np.ndarray] = {}

    @property
    def idx(self) -> np.ndarray:
        if self._idx is None:
            self._idx = np.flatnonzero(self._mask)
        return self._idx

    def __len__(self) -> int:
        return len(self.idx)

    def __getattr__(self, name: str) -> np.ndarray:
        if name.startswith("_") or name not in self.growth.table.cols:
            raise unread(name)
        if name not in self._cols:
            self._cols[name] = self.growth.table.column(name, self.idx)
        return self._cols[name]

    def subset(self, mask: np.ndarray) -> "Rows":
        """These rows where `mask` [n] holds (a policy that reads a feature only there: `Lazy` columns)."""
        return Rows(self.growth, self.idx[mask])

    @property
    def tree(self) -> np.ndarray:
        return self.growth.table.tree[self.idx]

    @property
    def n_trees(self) -> int:
        return self.growth.table.n_trees

    def top(self, key: np.ndarray, n: Union[int, np.ndarray]) -> np.ndarray:
        """bool [n]: the n largest `key` values of each tree (n: one count or one per row), ties towards
        shallower nodes, then offer order."""
        return top_in_groups(self.tree, key, n, self.depth)

    def count(self) -> np.ndarray:
        """long [n_trees]: rows per tree."""
        return np.bincount(self.tree, minlength=self.n_trees)

    def is_leaf(self) -> np.ndarray:
        """bool [n]: rows that are no other row's parent (among these rows)."""
        parent = np.zeros(len(self.growth.table), dtype=bool)
        parent[self.parents[self.parents >= 0]] = True
        return ~parent[self.idx]

    def sibling(self) -> np.ndarray:
        """long [n]: offer order among siblings (the rank under greedy drafting, the draw order when sampling)."""
        return sibling_order(self.parents)

    def parent(self, name: str) -> np.ndarray:
        """Column `name` at each row's parent."""
        return self.growth.table.column(name, self.parents)

    def slot_value(self) -> np.ndarray:
        """float64 [n], on a layer's offered rows (every sibling, in offer order): the estimated acceptance of the
        slot each child was drawn into (DySpec Alg. 1): its parent's joint P times the draft mass its earlier
        siblings left, P(parent)·(1 − Σ p of the earlier siblings). Known before the child's token is: a first
        child is worth P(parent), the next one what the earlier draws did not take."""
        left = np.clip(1.0 - mass_before(self.parents, self.draft_prob), 0.0, None)
        return self.parent("joint").astype(np.float64) * left

    def state(self, name: str, dtype=np.int64) -> np.ndarray:
        return self.growth.state(name, dtype)[self.idx]

    def parent_state(self, name: str, dtype=np.int64) -> np.ndarray:
        return self.growth.state(name, dtype)[self.parents]

    def set_state(self, name: str, values: np.ndarray) -> None:
        self.growth.state(name, np.asarray(values).dtype)[self.idx] = values


@dataclass
class Growth:
    """What `grow` did over a table: `grown` [N] nodes added while drafting, `kept` [N] the nodes of the finished
    trees (after `finalize`), `fed` [N] the nodes the draft was run on to offer their children (roots excluded:
    their distributions come with the last committed token)."""

    table: NodeTable
    grown: np.ndarray
    kept: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    fed: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    _states: dict[str, np.ndarray] = field(default_factory=dict)

    def fit(self) -> None:
        """Grow the masks to the table (live drafting appends the rows it offers)."""
        n = len(self.table)
        for name in ("grown", "kept", "fed"):
            mask = getattr(self, name)
            if len(mask) < n:
                setattr(self, name, np.concatenate([mask, np.zeros(n - len(mask), bool)]))
        for name, values in self._states.items():
            if len(values) < n:
                self._states[name] = np.concatenate([values, np.zeros(n - len(values), values.dtype)])

    def state(self, name: str, dtype=np.int64) -> np.ndarray:
        """Per-node memory `name` [N] (0 until set; its type from the first `set_state`, else `dtype`)."""
        if name not in self._states:
            self._states[name] = np.zeros(len(self.table), dtype=dtype)
        return self._states[name]

    def rows(self, mask: np.ndarray) -> Rows:
        return Rows(self, mask=mask.copy())


Offer = Callable[[Rows], np.ndarray]  # the frontier (all at one depth) → its candidate children's rows [c]


def grow(table: NodeTable, policy: "Policy", offer: Offer) -> Growth:
    """Grow every tree of `table` from its root under `policy`: the layer loop of live drafting and of replay."""
    g = Growth(table, grown=table.cols["parents"] < 0)
    g.fit()
    frontier = np.flatnonzero(g.grown)
    for _ in range(policy.d_max):
        cand = offer(Rows(g, frontier))  # may append rows to the table
        g.fit()
        g.fed[frontier[table.cols["depth"][frontier] > 0]] = True
        if len(cand) == 0:
            break
        new = cand[policy.select(Rows(g, cand), g.rows(g.grown))]
        if len(new) == 0:
            break
        g.grown[new] = True
        frontier = new[policy.expand(Rows(g, new), g.rows(g.grown))]
        if len(frontier) == 0:
            break
    g.kept = g.grown.copy()
    grown = g.rows(g.grown)
    g.kept[grown.idx] = policy.finalize(grown)
    return g


# --- the base class -----------------------------------------------------------------------------------------

def spec_field(default: Any = MISSING, **kwargs) -> Any:
    """A policy field that is NOT a spec parameter (a loaded model, a callable): set from Python only."""
    kwargs.setdefault("repr", False)
    kwargs.setdefault("compare", False)
    return field(default=default, metadata={"spec": False}, **kwargs)


class Policy:
    """Base of every tree policy. Subclasses are dataclasses whose fields are the spec parameters (the same
    names on the command line, in notebooks and in Python: `eagle2:K=8,N=32` is `Eagle2(K=8, N=32)`), and give
    `K` (children offered per node) and `d_max` (depth) as fields or properties."""

    name: ClassVar[str] = "policy"
    K: int
    d_max: int
    # the costly node features (OPTIONAL_FEATURES) this policy reads; live drafting computes only these, and
    # reading another is an error. By default all but the top-M entropy
    features: ClassVar[frozenset] = frozenset({"draft_prob", "entropy", "rank"})
    probabilities: ClassVar[tuple[str, ...]] = ()  # parameters validated to lie in [0, 1]
    # live drafting stops (errors.TreeTooLarge) rather than offer more candidates than this: a policy meant
    # for a confident draft can ask a weak one for thousands of nodes a CPU verifies for minutes
    max_nodes: ClassVar[Optional[int]] = 1024
    size_params: ClassVar[tuple[str, ...]] = ("K", "d_max")  # what to lower when the setting outgrows it
    # True when whether a node joins the tree never depends on its own token or anything computed from it (its p,
    # P, `rank`, the values of its subtree or of later siblings above its own): only on its parent's path and
    # distribution and its earlier siblings (`Rows.sibling`, `Rows.slot_value`). Whether a node gets children may
    # depend on its own value. At T > 0 such a policy's children are drawn without replacement and verified by
    # multi-branch verification (DySpec Alg. 3); any other policy is offered the draft's top-K and each child is
    # verified as a fixed proposal (`core.drafting.offer_sampling`, `core.verify`). The χ² tests check both.
    sampling_safe: ClassVar[bool] = False
    # True when the paper verifies its draft's top tokens at T > 0 rather than draws (Gunjur Alg. 1: "selecting b
    # top tokens" and matching the target's sample): offered the top-K, each child a fixed proposal, even if safe
    proposes_top: ClassVar[bool] = False
    # the spec parameters behind K and d_max where a policy names them otherwise (kary's b and d), so that
    # messages name what the user typed
    param_names: ClassVar[dict[str, str]] = {}
    # True when a greedy tree always has the worst-case size (`worst_case_nodes`): a static shape
    fixed_size: ClassVar[bool] = False

    def __post_init__(self):
        hints = typing.get_type_hints(type(self))
        for f in spec_fields(self):
            check_value(self.name, f.name, getattr(self, f.name), hints[f.name], f.name in self.probabilities)
        if self.K < 1:
            raise SpectreeError(f"{self.name}: {self.param('K')} (children per node) must be >= 1, got {self.K}")

    def param(self, name: str) -> str:
        """The spec parameter the user types for `name` ('K' or 'd_max')."""
        return self.param_names.get(name, name)

    retrieval: ClassVar[tuple] = ()  # retrieval proposers grafted into its trees (a `strategies.hybrid.Hybrid`'s)

    def grafter(self, tokens: list[int], stop: tuple[int, ...] = ()):
        """What grafts retrieval branches into this policy's trees over a generation that starts from the
        committed `tokens` (`retrieval.graft.Grafter`: `graft(tree, limit)`, `extend(new tokens)`; branches end at a
        `stop` token); None: no retrieval."""
        return None

    @property
    def drafting(self) -> "Policy":
        """The policy that grows the draft model's nodes: itself (a hybrid's base policy)."""
        return self

    @property
    def max_depth(self) -> int:
        """The deepest node a tree of this policy can hold (a hybrid's retrieval branches can outgrow d_max)."""
        return self.d_max

    def layer_cap(self) -> Optional[int]:
        """The most nodes one layer of this policy's trees can keep (and expand), if its setting bounds it."""
        return None

    def offer_cap(self) -> Optional[int]:
        """The most children `limit` lets one layer of a tree offer, if it bounds them (else K per frontier node)."""
        return None

    def layer_offers(self, frontier: int) -> int:
        """The most children live drafting offers a layer of `frontier` nodes: K each, at most `offer_cap`."""
        cap = self.offer_cap()
        return frontier * self.K if cap is None else min(frontier * self.K, cap)

    def worst_case(self) -> tuple[int, int]:
        """(count, depth): the largest count the live size guard (`max_nodes`) can see for this setting — the
        nodes kept so far plus the candidates the next layer offers (`layer_offers`: K per expanded node, at most
        `offer_cap`; at most `layer_cap` kept and expanded per layer) — and the depth of that layer; counting stops
        at the first layer past `max_nodes`."""
        limit = self.max_nodes if self.max_nodes is not None else math.inf
        cap = self.layer_cap() or math.inf
        total = frontier = worst = 1
        at = 0
        for depth in range(1, self.d_max + 1):
            offered = self.layer_offers(frontier)
            if total + offered > worst:
                worst, at = total + offered, depth
            if worst > limit:
                break
            frontier = min(offered, cap)
            total += frontier
        return worst, at

    def oversized(self) -> Optional[str]:
        """Why this setting can outgrow `max_nodes` and which parameters to lower (None if it cannot)."""
        if self.max_nodes is None:
            return None
        n, depth = self.worst_case()
        if n <= self.max_nodes:
            return None
        lower = " or ".join(dict.fromkeys(self.param(p) for p in self.size_params))
        reaches = "reaches" if self.fixed_size else "can reach"
        return (f"{self.spec} {reaches} {n:,} nodes at depth {depth} (kept plus offered), more than the "
                f"{self.max_nodes:,}-node guard (Policy.max_nodes): lower {lower}")

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        """bool [len(cand)]: which offered children (`cand`, this layer's, of every tree) join the trees
        (`tree`: the nodes kept so far)."""
        raise NotImplementedError

    def expand(self, new: Rows, tree: Rows) -> np.ndarray:
        """bool [len(new)]: which of the nodes just added are offered children at the next layer."""
        return np.ones(len(new), dtype=bool)

    def finalize(self, tree: Rows) -> np.ndarray:
        """bool [len(tree)]: the nodes kept in the finished trees (root-connected)."""
        return np.ones(len(tree), dtype=bool)

    def width(self, frontier: Rows) -> int:
        """How many children (≤ K) live drafting offers each frontier node: K unless the policy knows it keeps
        fewer whatever their values (a static shape). Replay may offer more."""
        return self.K

    def limit(self, offers: Rows, tree: Rows) -> Optional[np.ndarray]:
        """bool [len(offers)] or None (all): which of the children the draft just offered a frontier (`offers`, a
        `core.offers.Offers`: each node's `width` children in offer order, not yet in the table) live drafting
        appends and offers `select`. Drop only children that cannot end in the finished tree and whose absence
        changes no other decision (the tree stays the one replay grows from every logged child); a sampling-safe
        policy decides from values known before a child's token. `offer_cap` bounds what it lets through."""
        return None

    @property
    def needs_calibration(self) -> bool:
        """True while a parameter this policy measures on the machine is unset (PCT's s_d/s_t)."""
        return False

    def calibrate(self, sd_over_st: float) -> "Policy":
        """This policy with the parameters it measures on the machine filled in (PCT's s_d/s_t when not given)."""
        return self

    @property
    def spec(self) -> str:
        """The strategy spec that parses back to this policy (non-default parameters only)."""
        params = [f"{f.name}={_format(getattr(self, f.name))}" for f in spec_fields(self)
                  if f.default is MISSING or getattr(self, f.name) != f.default]
        return self.name + (":" + ",".join(params) if params else "")


def spec_fields(policy) -> list:
    """The dataclass fields of a policy (instance or class) that are spec parameters."""
    return [f for f in fields(policy) if f.metadata.get("spec", True) and f.init]


def check_value(policy: str, key: str, value: Any, kind: Any, probability: bool = False) -> None:
    """One clear error for a parameter of the wrong type or range (before any model loads)."""
    optional = typing.get_origin(kind) is Union and type(None) in typing.get_args(kind)
    if optional:
        if value is None:
            return
        kind = next(a for a in typing.get_args(kind) if a is not type(None))
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpectreeError(f"{policy}: {key} must be a whole number, got {value!r}")
        if value < 0:
            raise SpectreeError(f"{policy}: {key} must be >= 0, got {value}")
    elif kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise SpectreeError(f"{policy}: {key} must be a number, got {value!r}")
        if value < 0:
            raise SpectreeError(f"{policy}: {key} must be >= 0, got {value}")
        if probability and value > 1:
            raise SpectreeError(f"{policy}: {key} must be in [0, 1], got {value}")
    elif kind is str and not isinstance(value, str):
        raise SpectreeError(f"{policy}: {key} must be a name, got {value!r}")


def _format(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


__all__ = ["FEATURE_COLUMNS", "OPTIONAL_FEATURES", "computed_columns", "NodeTable", "Rows", "Growth", "Offer", "grow",
           "Policy", "spec_field", "spec_fields", "check_value"]
