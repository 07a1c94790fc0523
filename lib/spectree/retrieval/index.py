"""`ContextIndex`: the committed text (prompt + generation so far) indexed by its suffixes, for model-free drafts.

A bounded-depth suffix trie kept as a hash map: for every context c of 1..`order` tokens that occurred followed by a
token, how often each next token followed it and where it last did. Appending a token adds `order` entries, so
the index grows in O(new tokens) per step; a query (the longest indexed suffix of a text) costs `order` lookups.
Prompt lookup (PLD) reads the latest (or first) occurrence of the longest matching context; the suffix proposer reads the
next-token counts (`spectree.retrieval.proposers`).
"""
from __future__ import annotations

from collections import Counter
from typing import Optional, Sequence


class ContextIndex:
    """The suffix index of a growing token sequence.

    text    list[int]                   every token appended so far
    counts  {context: Counter(next)}    how often each token followed each context (tuples of 1..order tokens)
    seen    {context: int}              how often the context occurred followed by a token (its counts' sum)
    last    {context: position}         the position of the token that followed the context's latest occurrence
    first   {context: position}         ... its first occurrence (HF's prompt lookup reads that one)
    """

    def __init__(self, order: int, tokens: Sequence[int] = ()):
        self.order = order
        self.text: list[int] = []
        self.counts: dict[tuple, Counter] = {}
        self.seen: dict[tuple, int] = {}
        self.last: dict[tuple, int] = {}
        self.first: dict[tuple, int] = {}
        self.extend(tokens)

    def __len__(self) -> int:
        return len(self.text)

    def extend(self, tokens: Sequence[int]) -> None:
        """Append tokens: each becomes the next token of the (up to `order`) contexts that end just before it."""
        text = self.text
        for t in tokens:
            i = len(text)
            for n in range(1, min(self.order, i) + 1):
                ctx = tuple(text[i - n:i])
                self.counts.setdefault(ctx, Counter())[t] += 1
                self.seen[ctx] = self.seen.get(ctx, 0) + 1
                self.last[ctx] = i
                self.first.setdefault(ctx, i)
            text.append(int(t))

    def match(self, tail: Sequence[int], shortest: int, longest: Optional[int] = None) -> tuple[int, Optional[tuple]]:
        """(n, context): the longest suffix of `tail` of `shortest`..`longest` (default `order`) tokens that
        occurred followed by a token; (0, None) if none did."""
        longest = min(self.order if longest is None else longest, len(tail))
        for n in range(longest, shortest - 1, -1):
            ctx = tuple(tail[len(tail) - n:])
            if ctx in self.counts:
                return n, ctx
        return 0, None

    def probability(self, ctx: tuple, token: int) -> float:
        """How often `token` followed `ctx`, as a fraction of the context's occurrences."""
        return self.counts[ctx][token] / self.seen[ctx]


__all__ = ["ContextIndex"]
