"""A safe parser for Gunjur et al.'s branching function B(H), typed in the explorer: an expression in H (numbers, H,
+ − × ÷ **, comparisons, min, max, ceil, floor, `a if cond else b`; nothing else is evaluated) or a table of
`H bound, width` rows. The result is a `Branching`, which `strategies.gunjur.EntropyBranching(branching=...)` calls."""
from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from typing import Any, Callable, Sequence, Union

import numpy as np

from spectree.core.errors import SpectreeError

PAPER_RULE = "1 if H < 0.02 else (2 if H < 1 else min(ceil(4*H), 7))"  # Gunjur et al.'s best B(H)
PAPER_TABLE = [(0.02, 1), (1.0, 2), (1.25, 5), (1.5, 6), (math.inf, 7)]  # the same rule tabulated (but at H = 1, 1.25, 1.5)


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
