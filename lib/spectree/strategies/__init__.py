"""Tree policies by name, and the one parser of strategy specs.

A spec is `NAME[:key=value,...]`, e.g. `eagle2:K=8,N=32` or `chain:k=2`; the keys are the fields of the policy's
dataclass, so `parse_strategy("eagle2:K=8,N=32") == Eagle2(K=8, N=32)` and `policy.spec` gives the spec back.
Strings are parsed once, at the edges (command line, notebook parameters); everything inside takes `Policy`
objects. A new strategy is one file in this package plus one line in REGISTRY.

Retrieval proposers (`spectree.retrieval.proposers.RETRIEVERS`) join a spec with `+`: `pct:ratio=0.2+suffix:k=2,len=8`
is a `Hybrid` of the policy and the proposers (`ar+lookup`: prompt lookup alone).
"""
from __future__ import annotations

import inspect
import math
import typing
from typing import Any, Callable, Union

from spectree.core.errors import SpectreeError
from spectree.core.policy import Policy, spec_fields
from spectree.retrieval.proposers import RETRIEVERS
from spectree.strategies.c2t import C2T
from spectree.strategies.cape import CAPE
from spectree.strategies.chain import Chain, autoregressive
from spectree.strategies.dyspec import DySpec, DySpecThreshold
from spectree.strategies.eagle2 import Eagle2
from spectree.strategies.engines import TRTLLM, Choices, SGLang
from spectree.strategies.gunjur import EntropyBranching, NaiveWidth
from spectree.strategies.hybrid import Hybrid
from spectree.strategies.pct import PCT
from spectree.strategies.sequoia import Sequoia
from spectree.strategies.static import VCT, Kary, Sequences

REGISTRY: dict[str, Callable[..., Policy]] = {
    "ar": autoregressive,
    "chain": Chain,
    "kary": Kary,
    "vct": VCT,
    "sequences": Sequences,
    "sequoia": Sequoia,
    "entropy": EntropyBranching,
    "naive_width": NaiveWidth,
    "eagle2": Eagle2,
    "dyspec": DySpec,
    "dyspec_threshold": DySpecThreshold,
    "pct": PCT,
    "cape": CAPE,
    "c2t": C2T,
    "sglang": SGLang,
    "trtllm": TRTLLM,
    "choices": Choices,
}

# the paper each registered strategy and retrieval proposer comes from (`python -m spectree strategies` lists them)
PAPERS: dict[str, str] = {
    "ar": "baseline: plain autoregressive decoding through the same loop",
    "chain": "baseline: speculative decoding's chain (Leviathan et al.); stop=entropy Gunjur et al.'s simple cutoff, "
             "stop=dymax / dyjoint C2T's Table 3 chains",
    "kary": "Gunjur et al. (entropy-informed dynamic trees): the static b-ary tree",
    "vct": "EDD + PCT: the vanilla candidate tree",
    "sequences": "SpecInfer: k draft sequences sharing the root",
    "sequoia": "Sequoia: the DP-optimal static tree",
    "entropy": "Gunjur et al. (entropy-informed dynamic trees): dyn width B(H), with a finite cutoff dyn width + depth",
    "naive_width": "Gunjur et al. (entropy-informed dynamic trees): naive width",
    "eagle2": "EAGLE-2: expand the top K by joint P, rerank, verify N",
    "dyspec": "DySpec Alg. 1: the m slots of largest value",
    "dyspec_threshold": "DySpec Alg. 2: draw while the slot value >= t",
    "pct": "EDD + PCT: path-confidence tree",
    "cape": "CAPE (EDD + PCT's baseline)",
    "c2t": "C2T Alg. 1: a classifier over (P, H, d)",
    "sglang": "SGLang's EAGLE-2 tree (serving engine)",
    "trtllm": "TensorRT-LLM's dynamic tree (serving engine)",
    "choices": "a static tree in the engines' choices format (TensorRT-LLM eagle_choices, vLLM)",
    "lookup": "retrieval: prompt lookup decoding (Saxena 2023); HF's rule: len=10,n=2,min_n=1,len1=10,occurrence=first",
    "suffix": "retrieval: suffix counts (after SAM-Decoding, Hu et al. 2024)",
}


def split_spec(spec: str) -> tuple[str, dict[str, str]]:
    """'c2t:beta=0.5,classifier=x' → ('c2t', {'beta': '0.5', 'classifier': 'x'}): values stay text."""
    name, _, rest = str(spec).partition(":")
    params: dict[str, str] = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        key = key.strip()
        if not eq or not key:
            raise SpectreeError(f"bad strategy parameter '{item}' in '{spec}': expected key=value")
        if key in params:
            raise SpectreeError(f"strategy '{spec}' gives {key} twice")
        params[key] = value.strip()
    return name.strip(), params


def spec_types(name: str, registry: dict = REGISTRY) -> dict[str, Any]:
    """The spec parameters of a registered strategy (or retrieval proposer) and their types."""
    factory = registry[name]
    if inspect.isclass(factory):
        hints = typing.get_type_hints(factory)
        return {f.name: hints[f.name] for f in spec_fields(factory)}
    return {k: p.annotation for k, p in inspect.signature(factory).parameters.items()}


def _convert(name: str, key: str, text: str, kind: Any) -> Any:
    if typing.get_origin(kind) is Union:  # Optional[x]
        kind = next(a for a in typing.get_args(kind) if a is not type(None))
    if kind is int:
        try:
            return int(text)
        except ValueError:
            raise SpectreeError(f"{name}: {key} must be a whole number, got '{text}'") from None
    if kind is float:
        try:
            value = float(text)
        except ValueError:
            raise SpectreeError(f"{name}: {key} must be a number, got '{text}'") from None
        if math.isnan(value):
            raise SpectreeError(f"{name}: {key} must be a number, got '{text}'")
        return value
    return text


def _build(spec: str, registry: dict, what: str):
    name, texts = split_spec(spec)
    if name not in registry:
        raise SpectreeError(f"unknown {what} '{name}': use one of [{', '.join(sorted(registry))}]")
    types = spec_types(name, registry)
    unknown = sorted(set(texts) - set(types))
    if unknown:
        raise SpectreeError(f"{what} '{name}' has no parameter(s) {unknown}; it takes {sorted(types)}")
    return registry[name](**{k: _convert(name, k, v, types[k]) for k, v in texts.items()})


def split_hybrid(spec: str) -> list[str]:
    """'pct:ratio=0.2+suffix:k=2' → ['pct:ratio=0.2', 'suffix:k=2']: a '+' starts a part only where a retrieval
    proposer's name follows it, so a value may hold '+' (a classifier named 'a+b': 'c2t:classifier=a+b')."""
    parts: list[str] = []
    for piece in str(spec).split("+"):
        in_value = parts and "=" in parts[-1].rpartition(",")[2]  # the previous part ends in key=value
        if in_value and piece.partition(":")[0].strip() not in RETRIEVERS:
            parts[-1] += "+" + piece
        else:
            parts.append(piece)
    return parts


def parse_strategy(spec: str) -> Policy:
    """'kary:b=2,d=4', 'chain:k=5' or 'ar' → a policy; 'chain:k=2+lookup:len=8' → a `Hybrid` with retrieval
    branches; one clear error for an unknown name, key or value."""
    base, *extra = split_hybrid(spec)
    policy = _build(base, REGISTRY, "strategy")
    if not extra:
        return policy
    return Hybrid(policy, tuple(_build(part, RETRIEVERS, "retrieval proposer") for part in extra))

