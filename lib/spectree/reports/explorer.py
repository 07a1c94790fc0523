"""The pure logic behind the interactive explorer (`spectree.widgets`): score a policy on a logbook with the
vectorised replay plus a cost-model time estimate, a safe parser for Gunjur's branching function B(H),
policies built from the widget's settings, and the fixed frontier of other policies to compare against.

Estimated time of one step (`CostModel.step_seconds`): one draft forward per layer — the first over the
τ tokens the previous step committed (it yields the root's distribution), then one over every node the
policy expands (before EAGLE-2's / DySpec's final reranking: the draft saw those nodes) — plus one target
forward over the tree (γ + 1 tokens). Speedup over plain decoding = Σ τ · t_target(1) / Σ step time.
"""
from __future__ import annotations

import ast
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np
import pandas as pd

from spectree.core.errors import SpectreeError
from spectree.core.policy import Policy
from spectree.replay.forest import (
    Forest,
    fast_replay,
    finalize,
    grow_forest,
    vectorised_select,
)
from spectree.replay.logbook import LoggedPrompt
from spectree.replay.replay import replay_step, summarize
from spectree.speed.costmodel import CostModel
from spectree.strategies import (
    dyspec_greedy,
    dyspec_threshold,
    eagle2_rerank,
    entropy_branching,
    pct_prune,
)
from spectree.strategies.c2t import C2TPolicy
from spectree.strategies.chain import chain_policy
from spectree.strategies.dyspec import DySpecBudgetPolicy
from spectree.strategies.eagle2 import Eagle2Policy
from spectree.strategies.pct import PCTPolicy

FAMILIES = ("C2T", "EAGLE-2", "DySpec budget", "DySpec threshold", "PCT", "B(H)")
PAPER_RULE = "1 if H < 0.02 else (2 if H < 1 else min(ceil(4*H), 7))"  # Gunjur et al.'s best B(H)
PAPER_TABLE = [(0.02, 1), (1.0, 2), (1.25, 5), (1.5, 6), (math.inf, 7)]  # the same rule tabulated (but at H = 1, 1.25, 1.5)


# --- scoring ----------------------------------------------------------------------------------------------

def _forest(forest_or_logbook: Union[Forest, list[LoggedPrompt]]) -> Forest:
    return forest_or_logbook if isinstance(forest_or_logbook, Forest) else Forest.of(forest_or_logbook)


def grown_and_kept(forest: Forest, policy: Policy) -> tuple[np.ndarray, np.ndarray]:
    """(grown, kept) bool [N] over every logged node: the nodes the policy adds while drafting (before any
    final reranking) and the nodes of its finished trees. Raises SpectreeError where the logbook cannot
    replay it, like `fast_replay`."""
    select = vectorised_select(policy)
    if select is None:
        raise SpectreeError(f"{policy.name} has no vectorised replay")
    rerank = isinstance(policy, (Eagle2Policy, DySpecBudgetPolicy))
    grown = grow_forest(forest, Policy(K=policy.K, d_max=policy.d_max) if rerank else policy, select)
    return grown, finalize(policy, forest, grown) if rerank else grown


def expanded(policy: Policy, forest: Forest, grown: np.ndarray) -> np.ndarray:
    """bool [N]: grown nodes offered children (the root's come from the draft's last committed-token
    forward; every other one is fed to the draft, one forward per layer)."""
    out = grown & (forest.cols["depth"] < policy.d_max)
    if isinstance(policy, PCTPolicy):
        out &= forest.cols["joint"] >= policy.ratio
    return out


def _visited_trees(forest: Forest, steps: pd.DataFrame) -> np.ndarray:
    """Tree id of every replayed step (rows of fast_replay, prompt after prompt, each from position 0)."""
    tree_at = {(int(p), int(q)): t for t, (p, q) in enumerate(zip(forest.tree_prompt, forest.tree_position))}
    prompts = [i for i, lp in enumerate(forest.logbook) if lp.n_valid > 0]
    index = np.cumsum(steps.position.to_numpy() == 0) - 1
    return np.array([tree_at[(prompts[i], int(p))] for i, p in zip(index, steps.position)], dtype=np.int64)


def step_times(forest: Forest, policy: Policy, steps: pd.DataFrame, cost: CostModel,
               grown: Optional[np.ndarray] = None) -> np.ndarray:
    """Estimated seconds of every replayed step (`steps` from fast_replay) under the cost model."""
    taus, gammas = steps.tau.to_numpy(), steps.gamma.to_numpy()
    if grown is None and vectorised_select(policy) is None:  # slow path: the layer-loop replay's trees
        layers = []
        for lp in forest.logbook:
            for pos in steps.position[steps.prompt == lp.prompt.id]:
                tree, _ = replay_step(lp.tree(int(pos)), lp.continuation[int(pos):], policy)
                d = tree.depth.numpy()
                layers.append(tuple(int((d == k).sum()) for k in range(1, min(int(d.max()) + 1, policy.d_max))))
    else:
        grown = grown_and_kept(forest, policy)[0] if grown is None else grown
        exp = expanded(policy, forest, grown) & (forest.cols["depth"] >= 1)
        width = np.zeros((forest.n_trees, max(policy.d_max, 1)), dtype=np.int64)
        np.add.at(width, (forest.tree[exp], forest.cols["depth"][exp]), 1)
        visited = width[_visited_trees(forest, steps)]
        layers = [tuple(int(n) for n in row[1:] if n) for row in visited]
    memo: dict[tuple, float] = {}
    out = np.empty(len(taus))
    for i, (tau, gamma, lay) in enumerate(zip(taus, gammas, layers)):
        key = (int(tau), int(gamma), lay)
        if key not in memo:
            memo[key] = cost.step_seconds([int(tau), *lay], int(gamma) + 1)
        out[i] = memo[key]
    return out


def score(forest_or_logbook: Union[Forest, list[LoggedPrompt]], policy: Policy, cost: CostModel,
          grown: Optional[np.ndarray] = None) -> dict[str, Any]:
    """τ, γ, τ/γ (from `fast_replay`) and the estimated speedup over plain decoding of one policy; also
    the step count, estimated ms per step and per token, and the replay time. Raises SpectreeError where
    the logbook cannot replay the policy."""
    t0 = time.perf_counter()
    forest = _forest(forest_or_logbook)
    steps = fast_replay(forest.logbook, policy, forest)
    out = summarize(steps)
    seconds = step_times(forest, policy, steps, cost, grown)
    out.update(tau_per_gamma=out["tau"] / out["gamma"] if out["gamma"] else math.nan,
               speedup=float(steps.tau.sum() * cost.t_target(1) / seconds.sum()),
               step_ms=float(1000 * seconds.mean()), ms_per_token=float(1000 * seconds.sum() / steps.tau.sum()),
               replay_ms=1000 * (time.perf_counter() - t0))
    return out


# --- B(H) -------------------------------------------------------------------------------------------------

class BranchingError(SpectreeError):
    """A B(H) expression or table that is not allowed or does not give a whole number ≥ 0."""


_FUNCS = {"min": min, "max": max, "ceil": lambda x: float(math.ceil(x)), "floor": lambda x: float(math.floor(x))}
_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)
_CMPOPS = (ast.Lt, ast.LtE, ast.Gt, ast.GtE, ast.Eq, ast.NotEq)
_CHECK_H = [0.0, 0.001, 0.01, 0.019, 0.02, 0.05, 0.1, 0.25, 0.5, 0.75, 0.99, 1.0, 1.3, 1.6, 2.0, 2.5, 3.0, 4.0,
            5.0, 6.0, 8.0, 10.0, 12.0]  # entropies a B(H) is tried on when it is parsed (nats; log 49152 ≈ 10.8)
MAX_EXPRESSION = 400


def _whole(value: Any, h: float, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise BranchingError(f"B(H) = {source} gives {value!r} at H = {h:g}: it must be a number")
    if value < 0 or value != int(value):
        raise BranchingError(f"B(H) = {source} gives {value:g} at H = {h:g}: it must be a whole number ≥ 0 "
                             "(wrap it in ceil() or floor())")
    return int(value)


class _Check(ast.NodeTransformer):
    """Rejects every node outside the whitelist; turns number literals into floats (so ** cannot build
    huge integers)."""

    def generic_visit(self, node):
        raise BranchingError(f"'{ast.unparse(node)}' is not allowed in B(H): use numbers, H, + - * / **, "
                             "comparisons, min, max, ceil, floor and 'a if cond else b'")

    def visit_Expression(self, node):
        node.body = self.visit(node.body)
        return node

    def visit_Constant(self, node):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            return self.generic_visit(node)
        return ast.copy_location(ast.Constant(float(node.value)), node)

    def visit_Name(self, node):
        if node.id != "H":
            raise BranchingError(f"unknown name '{node.id}' in B(H): the only variable is H "
                                 "(functions: min, max, ceil, floor)")
        return node

    def visit_BinOp(self, node):
        if not isinstance(node.op, _BINOPS):
            return self.generic_visit(node)
        node.left, node.right = self.visit(node.left), self.visit(node.right)
        return node

    def visit_UnaryOp(self, node):
        if not isinstance(node.op, (ast.USub, ast.UAdd)):
            return self.generic_visit(node)
        node.operand = self.visit(node.operand)
        return node

    def visit_Compare(self, node):
        if not all(isinstance(op, _CMPOPS) for op in node.ops):
            return self.generic_visit(node)
        node.left, node.comparators = self.visit(node.left), [self.visit(c) for c in node.comparators]
        return node

    def visit_IfExp(self, node):
        node.test, node.body, node.orelse = self.visit(node.test), self.visit(node.body), self.visit(node.orelse)
        return node

    def visit_Call(self, node):
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name not in _FUNCS:
            raise BranchingError(f"'{ast.unparse(node.func)}(…)' is not allowed in B(H): the only functions are "
                                 "min, max, ceil, floor")
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise BranchingError(f"{name}() takes plain arguments only")
        if len(node.args) != 1 if name in ("ceil", "floor") else len(node.args) < 2:
            raise BranchingError(f"{name}() takes {'one argument' if name in ('ceil', 'floor') else 'two or more'}")
        node.args = [self.visit(a) for a in node.args]
        return node


@dataclass(frozen=True)
class Branching:
    """A validated B(H): call it with an entropy, get a width (int ≥ 0)."""

    source: str
    fn: Callable[[float], Any]

    def __call__(self, h: float) -> int:
        try:
            value = self.fn(float(h))
        except (ArithmeticError, ValueError, TypeError) as err:
            raise BranchingError(f"B(H) = {self.source} fails at H = {h:g}: {err}") from None
        return _whole(value, h, self.source)


def parse_expression(text: str) -> Branching:
    """B(H) from an expression in H, e.g. the paper's rule `PAPER_RULE`. The AST is checked against a
    whitelist before anything is compiled; it runs with no builtins and only min, max, ceil, floor."""
    text = (text or "").strip()
    if not text:
        raise BranchingError("B(H) is empty: write an expression in H, e.g. " + PAPER_RULE)
    if len(text) > MAX_EXPRESSION:
        raise BranchingError(f"B(H) is too long ({len(text)} characters, at most {MAX_EXPRESSION})")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        raise BranchingError(f"B(H) is not a valid expression: {getattr(err, 'msg', err)}") from None
    tree = ast.fix_missing_locations(_Check().visit(tree))
    code = compile(tree, "<B(H)>", "eval")
    env = {"__builtins__": {}, **_FUNCS}
    branching = Branching(text, lambda h: eval(code, env, {"H": h}))  # the AST was whitelisted above
    for h in _CHECK_H:
        branching(h)
    return branching


def parse_table(rows: Union[str, Sequence[Sequence[float]]]) -> Branching:
    """B(H) from breakpoints [(H upper bound, width), …] with increasing bounds: B(H) is the width of the
    first row whose bound exceeds H, and the last row's width beyond the last bound. Text form: one
    `bound, width` (or `bound: width`) per line, `inf` allowed."""
    if isinstance(rows, str):
        parsed = []
        for n, line in enumerate(rows.strip().splitlines(), start=1):
            parts = line.replace(":", ",").split(",")
            if not line.strip():
                continue
            try:
                bound, width = (float(p) for p in parts)
            except ValueError:
                raise BranchingError(f"B(H) table line {n} '{line.strip()}': expected 'H bound, width'") from None
            parsed.append((bound, width))
        rows = parsed
    rows = [(float(b), w) for b, w in rows]
    if not rows:
        raise BranchingError("the B(H) table is empty: give rows of 'H bound, width'")
    bounds = [b for b, _ in rows]
    if any(math.isnan(b) for b in bounds) or any(b2 <= b1 for b1, b2 in zip(bounds, bounds[1:])):
        raise BranchingError(f"B(H) table bounds must increase, got {bounds}")
    widths = [_whole(w, b, "table") for b, w in rows]
    source = "; ".join(f"H < {b:g}: {w}" for b, w in zip(bounds, widths))
    lookup = np.asarray(bounds)
    return Branching(source, lambda h: widths[min(int(np.searchsorted(lookup, h, side="right")), len(widths) - 1)])


def format_table(rows: Sequence[Sequence[float]]) -> str:
    return "\n".join(f"{b:g}, {int(w)}" for b, w in rows)


# --- policies from settings -------------------------------------------------------------------------------

def policy_for(family: str, settings: dict[str, Any], classifier=None) -> Policy:
    """The policy of one explorer family from its settings (the keys of `widgets.Explorer`'s fields)."""
    s = settings
    if family == "C2T":
        if classifier is None:
            raise SpectreeError("C2T needs a classifier: pass one to the explorer")
        return C2TPolicy(K=s["K"], d_max=s["d_max"], beta=s["beta"], topk=s["topk"], classifier=classifier)
    if family == "EAGLE-2":
        return eagle2_rerank(K=s["K"], d_max=s["d_max"], N=s["N"])
    if family == "DySpec budget":
        return dyspec_greedy(m=s["m"], K=s["K"], d_max=s["d_max"])
    if family == "DySpec threshold":
        return dyspec_threshold(t=s["t"], K=s["K"], d_max=s["d_max"])
    if family == "PCT":
        return pct_prune(ratio=s["ratio"], k=s["K"], d_max=s["d_max"])
    if family == "B(H)":
        branching = parse_expression(s["expression"]) if s["mode"] == "expression" else parse_table(s["table"])
        return entropy_branching(d=s["d_max"], k_max=s["K"], branching=branching)
    raise SpectreeError(f"unknown family '{family}': use one of {list(FAMILIES)}")


def live_spec(family: str, settings: dict[str, Any], classifier_name: Optional[str] = None) -> Optional[str]:
    """The strategy spec `bench.run_strategies` decodes for these settings (None for a custom B(H), which
    has no spec: the widget registers it under a temporary name)."""
    s = settings
    if family == "C2T":
        if not classifier_name:
            raise SpectreeError("live C2T needs the classifier's name (data/c2t/<name>.safetensors)")
        return f"c2t:beta={s['beta']:g},K={s['K']},d_max={s['d_max']},topk={s['topk']},classifier={classifier_name}"
    return {"EAGLE-2": lambda: f"eagle2:K={s['K']},d_max={s['d_max']},N={s['N']}",
            "DySpec budget": lambda: f"dyspec:m={s['m']},K={s['K']},d_max={s['d_max']}",
            "DySpec threshold": lambda: f"dyspec_threshold:t={s['t']:g},K={s['K']},d_max={s['d_max']}",
            "PCT": lambda: f"pct:ratio={s['ratio']:g},k={s['K']},d_max={s['d_max']}",
            "B(H)": lambda: None}[family]()


# --- the frontier -----------------------------------------------------------------------------------------

def frontier_policies(K: int, d_max: int, depth: int, ratio: float, classifier=None) -> list[tuple[str, str, Policy]]:
    """(family, label, policy): a fixed comparison set sized to a logbook with K children and depth d_max
    (`depth`: the EAGLE-2 / C2T depth)."""
    k8, k5, k7 = min(8, K), min(5, K), min(7, K)
    out = [("chain", f"chain:k={k}", chain_policy(k)) for k in range(1, d_max + 1)]
    out += [("EAGLE-2", f"eagle2 N={n}", eagle2_rerank(K=min(10, K), d_max=depth, N=n)) for n in (5, 10, 20, 30, 40, 60)]
    out += [("DySpec budget", f"dyspec m={m}", dyspec_greedy(m=m, K=k8, d_max=d_max)) for m in (4, 8, 16, 32, 64)]
    out += [("DySpec threshold", f"dyspec t={t:g}", dyspec_threshold(t=t, K=k8, d_max=d_max))
            for t in (0.3, 0.1, 0.05, 0.02, 0.01)]
    out += [("PCT", f"pct ratio={r:.3g}", pct_prune(ratio=r, k=k5, d_max=d_max))
            for r in sorted({0.3, 0.2, 0.1, 0.05, 0.02, round(ratio, 3)}, reverse=True)]
    out += [("B(H)", f"paper B(H) d={d}", entropy_branching(d=d, k_max=k7)) for d in sorted({min(3, d_max), min(4, d_max)})]
    if classifier is not None:
        out += [("C2T", f"c2t beta={b:g}", C2TPolicy(K=min(10, K), d_max=depth, beta=b, classifier=classifier))
                for b in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)]
    return out


def frontier(forest: Forest, cost: CostModel, policies: list[tuple[str, str, Policy]]) -> pd.DataFrame:
    """τ, γ, τ/γ and estimated speedup of every replayable policy of the list (others are left out)."""
    rows = []
    for family, label, policy in policies:
        try:
            numbers = score(forest, policy, cost)
        except SpectreeError:
            continue
        rows.append({"family": family, "label": label, **{k: numbers[k] for k in ("tau", "gamma", "tau_per_gamma",
                                                                                     "speedup")}})
    return pd.DataFrame(rows, columns=["family", "label", "tau", "gamma", "tau_per_gamma", "speedup"])


def cached_cost_model(pair: str, load_models: Optional[Callable[[], tuple]] = None) -> tuple[CostModel, str]:
    """The pair's cost model on this machine (`costmodel.load_or_measure`'s cache); where that is missing,
    one cached for the pair on this host with another thread count (noted in the returned origin); else
    measured now (loads the pair with `load_models`)."""
    from spectree.speed.costmodel import (
        cache_path,
        machine_id,
        pair_cost_model,
        read_cached,
    )

    exact = cache_path(pair)
    host = machine_id().rsplit("-", 1)[0]
    others = sorted((p for p in exact.parent.glob(cache_path(pair, f"{host}-*").name) if p != exact),
                    key=lambda p: p.stat().st_mtime)
    for path, note in [(exact, "")] + [(o, " (measured with other threads)") for o in reversed(others)]:
        cached = read_cached(path)
        if cached is not None:
            return cached, f"cached {path.stem}{note}"
    if load_models is None:
        from spectree.drafts.pairs import load_pair

        def load_models():
            return load_pair(pair)
    return pair_cost_model(pair, load_models()), "measured on this machine"


def cached_tokenizer(pair: str):
    """The pair's tokenizer from the dequantised-model cache (token text in tree drawings), or None
    when the target has not been cached yet (the drawings then show token ids)."""
    from transformers import AutoTokenizer

    from spectree.core.paths import cache_dir
    from spectree.drafts.pairs import check_pair_name

    folder = cache_dir() / "models" / check_pair_name(pair).target
    return AutoTokenizer.from_pretrained(str(folder)) if (folder / "tokenizer.json").exists() else None
