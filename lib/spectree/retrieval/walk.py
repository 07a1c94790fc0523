"""τ and γ of retrieval alone (`ar+lookup`, `ar+suffix`, HF's rule) without a model: greedy speculative decoding
commits the target's greedy tokens whatever is proposed, so one greedy continuation of a prompt says what every
proposer's branches would have had accepted, step by step. This is how a proposer's rule is compared on many
prompts at the cost of one plain generation each (`scripts/lookup_rules.py`); a test pins it to live decoding.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from spectree.core.metrics import gamma, tau
from spectree.retrieval.graft import Grafter
from spectree.retrieval.proposers import Retrieval


@dataclass
class Walk:
    """One generation walked, a step per target forward: `taus` (τ: accepted + the target's own token) and
    `sizes` (tokens each forward verifies: the root and the grafted branches' nodes, γ + 1)."""

    taus: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)

    @property
    def tokens(self) -> int:
        """Σ τ: past max_new_tokens / EOS by at most the last step's."""
        return sum(self.taus)

    @property
    def forwards(self) -> int:
        return len(self.taus)

    @property
    def candidates(self) -> int:
        """Σ γ."""
        return sum(gamma(n) for n in self.sizes)


def walk(retrievers: Sequence[Retrieval], prompt_ids: list[int], continuation: list[int], max_new_tokens: int,
         stop: Sequence[int] = ()) -> Walk:
    """Decode `continuation` (the target's greedy tokens after `prompt_ids`: its generation, cut at EOS) as
    `core.decode` does with a retrieval-only policy: each step grafts the proposers' branches (cut after a `stop`
    token and to the tokens left) into the root, the target accepts the longest branch prefix that its greedy
    tokens follow (`core.verify`'s greedy path through a tree whose siblings never share a token), plus its own."""
    grafter, out, done, new = Grafter(retrievers, prompt_ids, stop), Walk(), [], []
    while len(done) < max_new_tokens and not any(t in stop for t in new):
        proposed = grafter.proposals(max_new_tokens - len(done) - 1)
        ahead = continuation[len(done):]
        branches = [b.tokens for _, bs in proposed for b in bs]
        size = len({tuple(b[:j]) for b in branches for j in range(1, len(b) + 1)})  # the grafted trie's nodes
        accepted = max((next((j for j, (x, y) in enumerate(zip(b, ahead)) if x != y), min(len(b), len(ahead)))
                        for b in branches), default=0)
        new = ahead[:tau(accepted)]
        done += new
        grafter.extend(new)
        out.taus.append(tau(accepted))
        out.sizes.append(size + 1)
    return out


__all__ = ["Walk", "walk"]
