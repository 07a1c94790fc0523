"""Prompt length as an axis: prompts of a set token count, for timing how speculation fares as the committed
prefix grows (attention over the prefix is the part of a forward that grows with it; `costmodel.length_table`
times that side alone).

A long prompt is a body of real text followed by a copy-type instruction (summarize / list the key points /
rewrite the first paragraph), whose answer leans on the prompt. The bodies are the human and assistant turns of
consecutive ShareGPT records (`prompts.load_sharegpt_conversations`), one run of records per prompt index, so
prompt i of every length is a prefix of the same text: lengths differ, the text does not (nor does it with the
other lengths asked for, up to max(LENGTHS)). Each body is cut at a
token boundary (encode, cut, decode) so that the whole prompt, chat template applied (`prompts.chat_ids`), has the
target length; re-tokenising the cut can move a token or two, which a few corrections take back. Deterministic.
"""
from __future__ import annotations

from typing import Any, Sequence, Union

from spectree.core.errors import SpectreeError
from spectree.prompts import Prompt, chat_ids, load_sharegpt_conversations

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


def sharegpt_bodies(tokenizer: Any, n: int, tokens: int) -> list[list[int]]:
    """n token-id lists (no special tokens added) of at least `tokens` each: the `TURNS` of consecutive ShareGPT
    records joined by blank lines, body i + 1 starting at the record after body i's last."""
    bodies, turns, count = [], [], 0
    for record in load_sharegpt_conversations()[0]:
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
                 instruction: Union[str, Sequence[str]] = INSTRUCTIONS) -> list[Prompt]:
    """n prompts per length (lengths outer): Prompt('long', f'{L}-{i}', length_label(L), body + '\\n\\n' +
    instruction), whose chat-templated token count is L (within a token or two where re-tokenising the cut moves
    it). Prompt i takes instruction[i % len(instruction)] (one string: always that one) and ShareGPT body i, the
    same whichever lengths are asked for as long as none passes max(LENGTHS)."""
    instructions = (instruction,) if isinstance(instruction, str) else tuple(instruction)
    if n < 1 or not lengths or not instructions:
        raise SpectreeError("long_prompts needs n >= 1, at least one length and at least one instruction")
    bodies = sharegpt_bodies(tokenizer, n, max(*lengths, *LENGTHS) + SLACK)
    return [Prompt("long", f"{length}-{i}", length_label(length),
                   fit(tokenizer, body, "\n\n" + instructions[i % len(instructions)], length))
            for length in lengths for i, body in enumerate(bodies)]


__all__ = ["INSTRUCTIONS", "LENGTHS", "fit", "length_label", "long_prompts", "sharegpt_bodies"]
