"""Prompt length as an axis: prompts of a set token count, for timing how speculation fares as the committed
prefix grows (attention over the prefix is the part of a forward that grows with it; `length_table` times that side
alone).

A long prompt is a body of real text followed by a copy-type instruction (summarize / list the key points /
rewrite the first paragraph), whose answer leans on the prompt. The bodies are the human and assistant turns of
consecutive ShareGPT records (`prompts.load_sharegpt_conversations`), one run of records per prompt index, so
prompt i of every length is a prefix of the same text: lengths differ, the text does not (nor does it with the
other lengths asked for, up to max(LENGTHS)). Each body is cut at a
token boundary (encode, cut, decode) so that the whole prompt, chat template applied (`prompts.chat_ids`), has the
target length; re-tokenising the cut can move a token or two, which a few corrections take back. Deterministic.
"""
from __future__ import annotations

from typing import Any, Collection, Sequence, Union

import pandas as pd

from spectree.core.errors import SpectreeError
from spectree.prompts import Prompt, chat_ids, load_sharegpt_conversations
from spectree.speed.costmodel import time_forwards

LENGTHS = (256, 1024, 2048, 4096)  # prompt tokens, chat template included
INSTRUCTIONS = ("Summarize the text above in a few sentences.",
                "List the key points of the text above.",
                "Rewrite the first paragraph of the text above.")
TURNS = ("human", "gpt")  # the ShareGPT roles whose text makes a body
SLACK = 64  # body tokens beyond the longest length, so that no cut runs out of text
FIT_STEPS = 6  # corrections of the cut before the nearest length found is taken


def length_label(tokens: int) -> str:
    """A length's category name: 256 → '256', 1024 → '1k', 4096 → '4k'."""
    return f"{tokens // 1024}k" if tokens % 1024 == 0 else str(tokens)


def sharegpt_bodies(tokenizer: Any, n: int, tokens: int, exclude: Collection[str] = ()) -> list[list[int]]:
    """n token-id lists (no special tokens added) of at least `tokens` each: the `TURNS` of consecutive ShareGPT
    records joined by blank lines, body i + 1 starting at the record after body i's last; records whose id is in
    `exclude` (a draft's training records, `training_records`) are passed over."""
    bodies, turns, count = [], [], 0
    for record in load_sharegpt_conversations()[0]:
        if str(record.get("id")) in exclude:
            continue
        texts = [m["value"] for m in record.get("conversations", []) if m.get("from") in TURNS and m.get("value")]
        turns += texts
        count += sum(len(tokenizer.encode(t, add_special_tokens=False)) for t in texts)
        if count < tokens:
            continue
        ids = tokenizer.encode("\n\n".join(turns), add_special_tokens=False)
        if len(ids) >= tokens:
            bodies.append(ids)
            turns, count = [], 0
            if len(bodies) == n:
                return bodies
    raise SpectreeError(f"ShareGPT holds fewer than {n} bodies of {tokens:,} tokens")


def fit(tokenizer: Any, body: list[int], suffix: str, length: int) -> str:
    """decode(body[:k]) + suffix, with k chosen so that its chat_ids are `length` tokens long (or the nearest
    that `FIT_STEPS` corrections of k reach)."""
    k = length - len(chat_ids(tokenizer, suffix))  # the template and the instruction take the rest
    if k < 1:
        raise SpectreeError(f"a prompt of {length} tokens leaves no room for a body: the chat template and "
                            f"{suffix.strip()!r} alone take {length - k}")
    best = (float("inf"), "")
    for _ in range(FIT_STEPS):
        text = tokenizer.decode(body[:k]).rstrip("\ufffd") + suffix  # a cut inside a character drops it
        miss = len(chat_ids(tokenizer, text)) - length
        best = min(best, (abs(miss), text), key=lambda b: b[0])
        if miss == 0 or not 1 <= k - miss <= len(body):
            break
        k -= miss
    return best[1]


def long_prompts(tokenizer: Any, lengths: Sequence[int] = LENGTHS, n: int = 4,
                 instruction: Union[str, Sequence[str]] = INSTRUCTIONS, exclude: Collection[str] = ()) -> list[Prompt]:
    """n prompts per length (lengths outer): Prompt('long', f'{L}-{i}', length_label(L), body + '\\n\\n' +
    instruction), whose chat-templated token count is L (within a token or two where re-tokenising the cut moves
    it). Prompt i takes instruction[i % len(instruction)] (one string: always that one) and ShareGPT body i, the
    same whichever lengths are asked for as long as none passes max(LENGTHS); ShareGPT records in `exclude` are
    passed over (`sharegpt_bodies`)."""
    instructions = (instruction,) if isinstance(instruction, str) else tuple(instruction)
    if n < 1 or not lengths or not instructions:
        raise SpectreeError("long_prompts needs n >= 1, at least one length and at least one instruction")
    bodies = sharegpt_bodies(tokenizer, n, max(*lengths, *LENGTHS) + SLACK, frozenset(exclude))
    return [Prompt("long", f"{length}-{i}", length_label(length),
                   fit(tokenizer, body, "\n\n" + instructions[i % len(instructions)], length))
            for length in lengths for i, body in enumerate(bodies)]


def training_records(pair: str) -> frozenset[str]:
    """The ShareGPT record ids the pair's trained draft drew its text from (its card's `training_prompts`,
    `training.provenance`), which the long prompts' bodies pass over; empty for a draft without a card or a card that
    records none (layer-skip, hf:, eagle: drafts trained on nothing of ours)."""
    import json

    from spectree.models.pairs import as_pair
    from spectree.training.provenance import card_prompts

    spec = as_pair(pair).spec
    while spec.kind == "mix":  # a synthetic mix drafts with its inner draft
        spec = as_pair(f"t+{spec.arg}").spec
    card = spec.checkpoint.with_suffix(".json") if getattr(spec, "checkpoint", None) is not None else None
    found = card_prompts(json.loads(card.read_text())) if card is not None and card.exists() else None
    return frozenset((found or {}).get("sharegpt", []))


LENGTH_SIZES, LENGTH_PREFIXES = (1, 4, 16, 32), (256, 1024, 2048, 4096)


def length_table(target, sizes=LENGTH_SIZES, prefixes=LENGTH_PREFIXES, repeats: int = 3) -> pd.DataFrame:
    """The prompt-length axis of the cost model, measured now and never cached: one row per (prefix L, n) with
    the target's forward time over n tree tokens after L committed tokens (`costmodel.time_forwards`, fastest of
    `repeats`) and ratio_to_one_token, that time over the n = 1 time at the same L (sizes must include 1).
    Columns: prefix, n, seconds, ratio_to_one_token; len(prefixes) * len(sizes) rows, prefixes outer."""
    if 1 not in sizes:
        raise SpectreeError(f"length_table needs n = 1 among its sizes for the ratio, got {tuple(sizes)}")
    rows = [{"prefix": prefix, "n": n, "seconds": t}
            for prefix in prefixes for n, t in zip(sizes, time_forwards(target, sizes, prefix, repeats))]
    df = pd.DataFrame(rows, columns=["prefix", "n", "seconds"])
    one = df[df.n == 1].set_index("prefix").seconds
    return df.assign(ratio_to_one_token=df.seconds / df.prefix.map(one))


__all__ = ["INSTRUCTIONS", "LENGTHS", "fit", "length_label", "length_table", "long_prompts", "sharegpt_bodies",
           "training_records"]
