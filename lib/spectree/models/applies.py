"""Whether a part of a notebook that needs something of the pair (the SmolLM2 target the workbook's drafts are
trained for, a draft the workbook trained, an EDD draft) applies to a given pair, and why not: read from the pair's
name alone, nothing loads."""
from __future__ import annotations

from typing import NamedTuple

NEEDS = {
    "smollm2": "the workbook's own target (SmolLM2-135M-Instruct), for which its EDD/VDM drafts are trained",
    "trained": "a draft the workbook trained (edd:NAME or vdm:NAME)",
    "edd": "an EDD draft (edd:NAME: the soft prompt and the target's hidden states)",
}


class Applies(NamedTuple):
    """Whether a part applies (`ok`, also the truth value) and, when it does not, why (one sentence)."""

    ok: bool
    why: str = ""

    def __bool__(self) -> bool:
        return self.ok


def applies(pair: str, needs: tuple[str, ...] | str = ()) -> Applies:
    """Whether a notebook part that needs each of `needs` (keys of NEEDS) applies to `pair` (named, a preset or
    TARGET+DRAFT; read without loading anything)."""
    from spectree.drafts.draftspec import parse_draft
    from spectree.models.pairs import TARGETS, check_pair_name

    needs = (needs,) if isinstance(needs, str) else tuple(needs)
    unknown = sorted(set(needs) - set(NEEDS))
    if unknown:
        raise ValueError(f"unknown needs {unknown}: use {sorted(NEEDS)}")
    spec = check_pair_name(pair)
    kind = parse_draft(spec.draft).kind
    have = {"smollm2": spec.target in TARGETS, "trained": kind in ("edd", "vdm"), "edd": kind == "edd"}
    missing = [n for n in needs if not have[n]]
    if not missing:
        return Applies(True)
    return Applies(False, f"needs {' and '.join(NEEDS[n] for n in missing)}; pair {pair} has target {spec.target} "
                          f"and draft {spec.draft}")
