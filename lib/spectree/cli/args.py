"""The command line's argument types: each refuses a bad value in one line, naming the flag, before a model loads."""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from spectree.core.errors import SpectreeError

def _shown(default) -> str:
    """A default as --help shows it: lists space-separated, None as 'none', a switch's False as 'off'."""
    if default is None or (isinstance(default, (str, list, tuple)) and not default):
        return "none"
    if isinstance(default, bool):
        return "on" if default else "off"
    if isinstance(default, (list, tuple)):
        return " ".join(map(str, default))
    return str(default)


class _Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """--help gives every flag's default after its help, '(default: X)', unless the help says it itself
    ('default: ...'); positional and required arguments have none."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (action.default is argparse.SUPPRESS or not action.option_strings or action.required
                or "default:" in text or "%(default)" in text):
            return text
        return f"{text} (default: {_shown(action.default).replace('%', '%%')})"


class _Parser(argparse.ArgumentParser):
    """argparse whose refusals read like every other one: one line `spectree: error: ...`, exit code 2; its
    --help (and its subcommands', which argparse makes of the same class) shows every flag's default."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"spectree: error: {message}\n")


class _Renamed(argparse.Action):
    """A flag that was renamed: refused in one line that names the new one (hidden from --help)."""

    def __init__(self, option_strings, dest, now: str = "", **kwargs):
        super().__init__(option_strings, argparse.SUPPRESS, nargs="?", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
        self.now = now

    def __call__(self, parser, namespace, values, option_string=None):
        parser.error(f"{option_string} is now {self.now}")


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
    from spectree.models.targets import resolve_device

    try:
        return text if text == "auto" else resolve_device(text)
    except SpectreeError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


DEFAULT_PAIR = "smollm2-layerskip"
PAIR_HELP = ("named target/draft pair (smollm2-edd, smollm2-vdm, smollm2-layerskip or a preset of params/pairs.yaml), or "
             "TARGET+DRAFT: TARGET a registry name, a model folder, a GGUF file or a cached hub id; DRAFT layerskip:N, "
             "edd:NAME[@V], vdm:NAME[@V], hf:MODEL, eagle:FOLDER, mix:λ:DRAFT")
STRATEGIES_HELP = "tree policy specs NAME[:key=value,...], a retrieval proposer joined with + (e.g. pct:ratio=0.2+lookup)"
LIST_STRATEGIES = "; every spec, its knobs and defaults: python -m spectree strategies"


def _common(p: argparse.ArgumentParser, prompts: str, max_new: int) -> None:
    p.add_argument("--pair", default=DEFAULT_PAIR,
                   help=f"{PAIR_HELP} (default: {DEFAULT_PAIR}, the pair that needs no trained checkpoint, only the "
                        f"target; the README's examples use smollm2-edd, the shipped trained EDD draft)")
    _placement(p)
    p.add_argument("--prompts", default=prompts, help="prompt spec, e.g. mtbench:8+humaneval:8 (mtbench, humaneval, "
                                                      "sharegpt, pystdlib, copy, jsonl:PATH[:N], joined with +)")
    _chat(p)
    p.add_argument("--max-new-tokens", type=_whole(1), default=max_new,
                   help="new tokens per prompt (fewer where the target stops at EOS)")
    p.add_argument("--json", type=_output_file, help="also write the results here (atomically)")


def _placement(p: argparse.ArgumentParser) -> None:
    """`--dtype` and `--device`: where and in what precision the pair loads (`load_pair`)."""
    p.add_argument("--dtype", choices=("auto", "float32", "bfloat16", "float16"), default="auto",
                   help="precision of the pair (auto: bfloat16 on CUDA, float32 on CPU)")
    p.add_argument("--device", type=_device, default="auto",
                   help="auto (CUDA when present, a large target spread over every GPU), cpu, cuda, cuda:N")


def _kernels(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kernels", choices=("auto", "packed", "stock"), default="auto",
                   help="our decoder's kernels: auto (prepacked oneDNN weights from the row count where they are "
                        "faster on this machine, in-place grouped attention), packed (always) or HF's stock ones; "
                        "the HF generate reference always runs stock")


def _chat(p: argparse.ArgumentParser) -> None:
    """`--chat` / `--no-chat`: how prompts become token ids (`prompts.chat_mode`)."""
    p.add_argument("--chat", action=argparse.BooleanOptionalAction, default=None,
                   help="each prompt as a user turn of the target's chat template (--chat) or as raw text, BOS as the "
                        "tokenizer adds it (--no-chat); default: the template where the tokenizer has one, else the "
                        "raw text (a base model), said once")


def _train_type(f) -> dict:
    """How `train` reads a TrainConfig field, so that a bad value is refused naming the flag the user typed."""
    from spectree.training.training import DATA, KINDS, LOSSES

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


def _log_type(f) -> dict:
    """How `log` reads a LogConfig field: whole numbers >= 1, DySpec's budgets as 8,64 and Sequoia's p as 0.6/0.15."""
    if f.name == "dyspec_budgets":
        return {"type": _listed(",", int, 1, None, "whole numbers >= 1"), "metavar": "M[,M...]"}
    if f.name == "dyspec_sequoia":
        return {"type": _listed("/", float, 0, 1, "probabilities in (0, 1]"), "metavar": "P[/P...]"}
    return {"type": _whole(1)}


def _listed(sep: str, kind: type, low: float, high: "float | None", what: str):
    """An argument type: `sep`-separated numbers above `low` (at most `high`) → a tuple."""
    def listed(text: str) -> tuple:
        try:
            values = tuple(kind(v) for v in text.split(sep))
        except ValueError:
            values = ()
        if not values or any(not (low < v <= (high if high is not None else v)) for v in values):  # NaN fails
            raise argparse.ArgumentTypeError(f"expected {what} separated by '{sep}', got '{text}'")
        return values
    return listed


def _yes_no(text: str) -> bool:
    if text.lower() not in ("yes", "no", "true", "false", "1", "0"):
        raise argparse.ArgumentTypeError(f"expected yes or no, got '{text}'")
    return text.lower() in ("yes", "true", "1")
