"""Model-free proposers: continuations of the committed text read from its own suffix index (`ContextIndex`).

- `Lookup` (prompt lookup decoding, PLD; Saxena 2023, HF `prompt_lookup_num_tokens`): the longest suffix of the
  committed text (`n` down to `min_n` tokens) that occurred before, and the `len` tokens that followed its latest
  occurrence (or its first, or both: two branches; `len1` after a 1-token match) — copied verbatim.
- `Suffix` (after SAM-Decoding, Hu et al. 2024): the `k` tokens that most often followed the longest matching
  context, each extended greedily by the most frequent next token of its own longest matching context, up to
  `len` tokens (or until no context of `min_n` tokens matches) — k branches with count-based probabilities.

A proposer is a spec like a policy's (`lookup:len=8`, `suffix:k=2,len=8`), appended to a policy's spec with `+`
(`pct:ratio=0.2+suffix:k=2`, `ar+lookup`); `strategies.hybrid.Hybrid` grafts its branches into the policy's trees.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Optional, Sequence

from spectree.core.errors import SpectreeError
from spectree.core.tree import SOURCES
from spectree.retrieval.index import ContextIndex


@dataclass(frozen=True)
class Branch:
    """One proposed continuation of the committed text.

    tokens  [L] token ids
    probs   [L] each token's count-based probability under its longest matching context (text + tokens before it)
    match   [L] that context's length (0 where none matched: a copied token past what the index knows)
    """

    tokens: list[int]
    probs: list[float]
    match: list[int]


def scored(index: ContextIndex, tail: list[int], tokens: list[int], shortest: int, longest: int) -> Branch:
    """`tokens` proposed after `tail` as a `Branch`, each scored by the index under its longest matching context."""
    probs, match, virtual = [], [], list(tail)
    for t in tokens:
        n, ctx = index.match(virtual, shortest, longest)
        probs.append(index.probability(ctx, t) if ctx else 0.0)
        match.append(n)
        virtual.append(t)
    return Branch(list(tokens), probs, match)


def trimmed(branch: Branch, stop: Sequence[int] = (), limit: Optional[int] = None) -> Branch:
    """`branch` cut after its first `stop` token (an EOS: nothing after it is generated) and to `limit` tokens (the
    tokens a step may still commit, less the target's own); lossless either way, as only unusable tokens go."""
    end = len(branch.tokens) if limit is None else max(limit, 0)
    for j, t in enumerate(branch.tokens[:end]):
        if t in stop:
            end = j + 1
            break
    return branch if end >= len(branch.tokens) else Branch(branch.tokens[:end], branch.probs[:end], branch.match[:end])


class Retrieval:
    """Base of the proposers: dataclasses whose fields are their spec parameters (as for `core.policy.Policy`)."""

    name: ClassVar[str] = "retrieval"
    n: int  # the longest context matched
    min_n: int  # the shortest
    len: int  # tokens per branch

    def __post_init__(self):
        for key in ("n", "min_n", "len"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SpectreeError(f"{self.name}: {key} must be a whole number >= 1, got {value!r}")
        if self.min_n > self.n:
            raise SpectreeError(f"{self.name}: min_n={self.min_n} exceeds n={self.n}")

    @property
    def source(self) -> int:
        """The `source` code of the nodes it proposes (`core.tree.SOURCES`)."""
        return SOURCES.index(self.name)

    def propose(self, index: ContextIndex) -> list[Branch]:
        raise NotImplementedError

    @property
    def spec(self) -> str:
        from spectree.core.policy import spec_fields

        params = [f"{f.name}={getattr(self, f.name)}" for f in spec_fields(self) if getattr(self, f.name) != f.default]
        return self.name + (":" + ",".join(params) if params else "")


OCCURRENCES = ("latest", "first", "both")  # which earlier occurrence(s) of the matched suffix prompt lookup copies after


@dataclass(frozen=True)
class Lookup(Retrieval):
    """Prompt lookup: the tokens after the `occurrence` of the text's longest suffix of `n` down to `min_n` tokens
    that occurred before, in the prompt or the generation so far: `len` of them, `len1` after a 1-token match (one
    common token predicts less than two). "both" copies after the latest occurrence and after the first (two
    branches where they differ: the latest follows the generation's own repeats, the first the prompt's text).

    HF's rule (`PromptLookupCandidateGenerator`: the last 2 tokens, then the last 1, their first occurrence left to
    right, 10 tokens) is `HF_RULE`. The default proposes only after a 2- or 3-token match: on a CPU every verified
    token costs about an eighth of a forward, which the 1-token matches' few accepted tokens do not repay; `TAU_RULE`
    adds them (τ at least HF's, for a machine where a verified token is nearly free). Both were chosen on ShareGPT
    prompts with `scripts/lookup_rules.py` (docs/history.md, issue 75)."""

    len: int = 10  # tokens copied per proposal
    n: int = 3  # the longest suffix of the text matched
    min_n: int = 2  # the shortest
    len1: int = 4  # tokens copied after a 1-token match (min_n = 1; at most `len`)
    occurrence: str = "latest"  # "latest", "first" (HF's) or "both"

    name: ClassVar[str] = "lookup"

    def __post_init__(self):
        super().__post_init__()
        if isinstance(self.len1, bool) or not isinstance(self.len1, int) or self.len1 < 1:
            raise SpectreeError(f"lookup: len1 must be a whole number >= 1, got {self.len1!r}")
        if self.occurrence not in OCCURRENCES:
            raise SpectreeError(f"lookup: occurrence must be one of {list(OCCURRENCES)}, got {self.occurrence!r}")

    def propose(self, index: ContextIndex) -> list[Branch]:
        text = index.text
        n, ctx = index.match(text, self.min_n, self.n)
        if ctx is None:
            return []
        length = self.len if n > 1 else min(self.len, self.len1)
        starts = {"latest": [index.last[ctx]], "first": [index.first[ctx]],
                  "both": [index.last[ctx], index.first[ctx]]}[self.occurrence]
        copies = []
        for start in starts:
            tokens = text[start: start + length]
            if tokens not in copies:
                copies.append(tokens)
        tail = text[-index.order:]
        return [scored(index, tail, tokens, 1, index.order) for tokens in copies]


@dataclass(frozen=True)
class Suffix(Retrieval):
    """Suffix index: the `k` most frequent next tokens of the longest matching context (`n` down to `min_n`
    tokens), each extended by its own most frequent continuation up to `len` tokens."""

    k: int = 2  # branches: the most frequent next tokens
    len: int = 8  # tokens per branch at most
    n: int = 8  # the longest context matched
    min_n: int = 2  # the shortest (a branch ends where none matches)

    name: ClassVar[str] = "suffix"

    def __post_init__(self):
        super().__post_init__()
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise SpectreeError(f"suffix: k must be a whole number >= 1, got {self.k!r}")

    def propose(self, index: ContextIndex) -> list[Branch]:
        tail = index.text[-index.order:]
        n, ctx = index.match(tail, self.min_n, self.n)
        if ctx is None:
            return []
        branches = []
        for first, count in index.counts[ctx].most_common(self.k):
            tokens, probs, match, virtual = [first], [count / index.seen[ctx]], [n], tail + [first]
            while len(tokens) < self.len:
                m, c = index.match(virtual, self.min_n, self.n)
                if c is None:
                    break
                t, count = index.counts[c].most_common(1)[0]
                tokens.append(t)
                probs.append(count / index.seen[c])
                match.append(m)
                virtual.append(t)
            branches.append(Branch(tokens, probs, match))
        return branches


RETRIEVERS = {"lookup": Lookup, "suffix": Suffix}
HF_RULE = "lookup:len=10,n=2,min_n=1,len1=10,occurrence=first"  # HF's prompt lookup as one of ours (`prompt_lookup_num_tokens=10`)
TAU_RULE = "lookup:min_n=1,occurrence=both"  # ours with 1-token matches: τ ≥ HF's at fewer verified tokens than HF's

__all__ = ["Branch", "Retrieval", "Lookup", "Suffix", "RETRIEVERS", "HF_RULE", "TAU_RULE", "OCCURRENCES", "scored", "trimmed"]
