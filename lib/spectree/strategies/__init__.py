"""Tree policies by name. `make_policy("kary", b=2, d=4)` validates before any model loads."""
from __future__ import annotations

import inspect
from typing import Callable

from spectree.core.errors import SpectreeError
from spectree.core.policy import Policy
from spectree.strategies.c2t import c2t_policy
from spectree.strategies.chain import chain_policy
from spectree.strategies.pct import cape_policy, pct_prune
from spectree.strategies.dyspec import dyspec_greedy, dyspec_threshold
from spectree.strategies.eagle2 import eagle2_rerank
from spectree.strategies.gunjur import entropy_branching, naive_width
from spectree.strategies.sequoia import sequoia_policy
from spectree.strategies.static import kary_policy, sequences_policy, static_shape, vct_policy

REGISTRY: dict[str, Callable[..., Policy]] = {
    "ar": lambda: chain_policy(0),
    "chain": chain_policy,
    "kary": kary_policy,
    "sequences": sequences_policy,
    "sequoia": sequoia_policy,
    "vct": vct_policy,
    "entropy": entropy_branching,
    "naive_width": naive_width,
    "eagle2": eagle2_rerank,
    "dyspec": dyspec_greedy,
    "dyspec_threshold": dyspec_threshold,
    "pct": pct_prune,
    "cape": cape_policy,
    "c2t": c2t_policy,
}


def make_policy(name: str, **params) -> Policy:
    if name not in REGISTRY:
        raise SpectreeError(f"unknown strategy '{name}': use one of [{', '.join(sorted(REGISTRY))}]")
    factory = REGISTRY[name]
    accepted = inspect.signature(factory).parameters
    unknown = set(params) - set(accepted)
    if unknown:
        raise SpectreeError(f"strategy '{name}' has no parameter(s) {sorted(unknown)}; it takes {sorted(accepted)}")
    for key, value in params.items():
        default = accepted[key].default
        if isinstance(default, (int, float)) and isinstance(value, str):
            raise SpectreeError(f"strategy '{name}': {key} must be a number, got '{value}'")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value < 0:
            raise SpectreeError(f"strategy '{name}': {key} must be >= 0, got {value}")
    return factory(**params)


def split_spec(spec: str) -> tuple[str, dict]:
    """'c2t:beta=0.5,classifier=x' → ('c2t', {'beta': 0.5, 'classifier': 'x'}): numbers as int/float, names as text."""
    name, _, rest = spec.partition(":")
    params = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq:
            raise SpectreeError(f"bad strategy parameter '{item}' in '{spec}': expected key=value")
        value = value.strip()
        try:
            params[key.strip()] = int(value) if value.lstrip("-").isdigit() else float(value)
        except ValueError:
            params[key.strip()] = value  # a name, e.g. c2t:classifier=smollm2-edd
    return name.strip(), params


def parse_strategy(spec: str) -> Policy:
    """'kary:b=2,d=4' or 'chain:k=5' or 'ar' → a policy."""
    name, params = split_spec(spec)
    return make_policy(name, **params)


__all__ = ["Policy", "REGISTRY", "make_policy", "parse_strategy", "split_spec", "chain_policy", "kary_policy", "entropy_branching",
           "eagle2_rerank", "dyspec_greedy", "dyspec_threshold", "pct_prune", "cape_policy", "c2t_policy",
           "sequences_policy", "sequoia_policy", "naive_width", "vct_policy", "static_shape"]
