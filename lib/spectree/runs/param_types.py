"""A `--set` value against the literal type a notebook's tagged parameters cell declares (`name: type = value`):
`runs.runner.check_sets` refuses a wrong one in one line before any kernel starts."""
from __future__ import annotations

import ast

from spectree.core.errors import SpectreeError

_TYPES = {"int": int, "float": float, "str": str, "bool": bool, "list": list, "dict": dict, "tuple": tuple}


def check_type(what: str, value, annotation: ast.expr, default, notebook: str) -> None:
    """`value` fits a parameter declared `annotation` (`int`, `float`, `str`, `bool`, `list`, `dict`, or
    `list[int]`-style) with this `default`: a whole number is a float too, a bool is no number; a list's items (a
    dict's values) must be of the annotation's item type, or of the one type of the default's items where they
    share one. Refused in one line otherwise."""
    base = annotation.value if isinstance(annotation, ast.Subscript) else annotation
    kind = _TYPES.get(base.id) if isinstance(base, ast.Name) else None
    if kind is None:  # an annotation this check does not read: the notebook's own code judges the value
        return
    if not _fits(value, kind):
        key = what.rpartition(" ")[2]
        hint = f" (the value is read as YAML: quote a string, {key}='\"{value}\"')" if kind is str else ""
        raise SpectreeError(f"{what}={value!r}: {notebook} declares {key.rpartition('.')[2]}: "
                            f"{ast.unparse(annotation)}, got {type(value).__name__}{hint}")
    items = list(value.values()) if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else []
    item = _item_type(annotation, default)
    bad = next((v for v in items if item is not None and not _fits(v, item)), None)
    if bad is not None:
        raise SpectreeError(f"{what}={value!r}: {notebook}'s parameter holds {item.__name__} items, got "
                            f"{bad!r} ({type(bad).__name__})")


def _item_type(annotation: ast.expr, default):
    """The type of a list's items (a dict's values): the annotation's (`list[int]`, `dict[str, float]`), else the
    one type of the default's items (None where they are of several types or there are none)."""
    if isinstance(annotation, ast.Subscript):
        args = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
        last = args[-1]
        return _TYPES.get(last.id) if isinstance(last, ast.Name) else None
    items = list(default.values()) if isinstance(default, dict) else default if isinstance(default, list) else []
    kinds = {float if type(v) is int and any(type(w) is float for w in items) else type(v) for v in items}
    return kinds.pop() if len(kinds) == 1 else None


def _fits(value, kind: type) -> bool:
    """A YAML value fits a literal type: a bool only a bool, a whole number an int or a float."""
    if kind is bool or isinstance(value, bool):
        return kind is bool and isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, kind)
