"""The command line's argument types: each refuses a bad value in one line, naming the flag, before a model loads."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from spectree.core.errors import SpectreeError

class _Parser(argparse.ArgumentParser):
    """argparse whose refusals read like every other one: one line `spectree: error: ...`, exit code 2."""

    def error(self, message: str):
        self.exit(2, f"spectree: error: {message}\n")


def _whole(minimum: int):
    """An argument type: a whole number >= minimum ('2.5', '1e9', 'inf', 'nan' are refused)."""
    def whole(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {minimum}, got '{text}'")
        return value
    return whole


def _number(low: float, high: float = float("inf"), closed: bool = False):
    """An argument type: a finite number above `low` (or equal to it when `closed`) and at most `high`."""
    def number(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not ((value >= low if closed else value > low) and value <= high and value < float("inf")):  # NaN fails
            bounds = f"{'>=' if closed else '>'} {low:g}" + (f" and <= {high:g}" if high < float("inf") else "")
            raise argparse.ArgumentTypeError(f"expected a number {bounds}, got '{text}'")
        return value
    return number


def _output_file(text: str) -> Path:
    """An argument type: a file this process can write (atomically: its nearest existing folder must be writable)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder: name a file, e.g. {path / 'results.json'}")
    folder = next(p for p in path.absolute().parents if p.exists())
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot write {text}: {folder} is not a writable folder")
    return path


def _device(text: str) -> str:
    """An argument type: 'auto' or a torch device (cpu, cuda, cuda:N, mps)."""
    from spectree.drafts.targets import resolve_device

    try:
        return text if text == "auto" else resolve_device(text)
    except SpectreeError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _common(p: argparse.ArgumentParser, prompts: str, max_new: int) -> None:
    p.add_argument("--pair", default="smollm2-layerskip",
                   help="named target/draft pair (built-in or params/pairs.yaml), or TARGET+DRAFT: TARGET a registry "
                        "name, a model folder, a GGUF file or a cached hub id; DRAFT layerskip:N, edd:NAME, vdm:NAME, hf:MODEL, "
                        "eagle:FOLDER")
    p.add_argument("--dtype", choices=("auto", "float32", "bfloat16", "float16"), default="auto",
                   help="precision of the pair (auto: bfloat16 on CUDA, float32 on CPU)")
    p.add_argument("--device", type=_device, default="auto",
                   help="auto (CUDA when present, a large target spread over every GPU), cpu, cuda, cuda:N")
    p.add_argument("--prompts", default=prompts, help="prompt spec, e.g. mtbench:8+humaneval:8")
    _chat(p)
    p.add_argument("--max-new-tokens", type=_whole(1), default=max_new)
    p.add_argument("--json", type=_output_file, help="also write the results here (atomically)")


def _chat(p: argparse.ArgumentParser) -> None:
    """`--chat` / `--no-chat`: how prompts become token ids (`prompts.chat_mode`)."""
    p.add_argument("--chat", action=argparse.BooleanOptionalAction, default=None,
                   help="each prompt as a user turn of the target's chat template (--chat) or as raw text, BOS as the "
                        "tokenizer adds it (--no-chat); default: the template where the tokenizer has one, else the "
                        "raw text (a base model), said once")


def _train_type(f) -> dict:
    """How `train` reads a TrainConfig field, so that a bad value is refused naming the flag the user typed."""
    from spectree.drafts.training import DATA, KINDS, LOSSES

    choices = {"kind": KINDS, "loss": LOSSES, "data": DATA}
    if f.name in choices:
        return {"choices": choices[f.name]}
    if isinstance(f.default, bool):
        return {"type": _yes_no}
    if f.name in ("hidden_layer", "seed"):  # any whole number (hidden_layer -1: the default layer)
        return {"type": int}
    if isinstance(f.default, int):
        return {"type": _whole(1 if f.name.startswith("block_") else 0)}
    return {"type": _number(0, closed=f.name != "lr")}


def _yes_no(text: str) -> bool:
    if text.lower() not in ("yes", "no", "true", "false", "1", "0"):
        raise argparse.ArgumentTypeError(f"expected yes or no, got '{text}'")
    return text.lower() in ("yes", "true", "1")
