"""Prompt files named in a prompt spec as `jsonl:PATH[:N]`: the user's own prompts, one JSON object a line.

Two line formats, which may be mixed in one file:

- MT-bench question files: `{"question_id": 81, "category": "writing", "turns": ["...", "..."]}`; the first
  turn is the prompt, as in the built-in `mtbench` set;
- simple lines: `{"prompt": "...", "category": "...", "id": ...}`, `category` and `id` optional.

A prompt's id is its `question_id` (else `id`, else its line number), its category the line's `category` (else
the file's stem) and its dataset `jsonl:<stem>`, so its key (`Prompt.key`) is `jsonl:<stem>/<id>`: stable while
the file's lines keep their ids. Blank lines are skipped; any other line that does not hold one prompt is
refused in one SpectreeError naming the file and the line. The file is read whenever a spec names it (no cache),
and `identity_part` stands for it in cache keys by its content, not its path.

PATH is taken as written (relative to the working directory; notebooks run from the repository root); a
trailing `:N` counts only when N is an integer, so a PATH may hold ':' but not '+' (which joins specs).
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import NamedTuple

from spectree.core.errors import SpectreeError
from spectree.core.manifest import file_digest

PREFIX = "jsonl:"
_COUNT = re.compile(r"^(.*):([+-]?\d+)$")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
FORMATS = ('an MT-bench question {"question_id": ..., "category": "...", "turns": ["..."]} or '
           '{"prompt": "...", "category"?: "...", "id"?: ...}')


class PromptRow(NamedTuple):
    """One prompt of a file, as `prompts.Prompt` takes its fields (this layer sits below `prompts`)."""

    dataset: str
    id: str
    category: str
    text: str


def is_jsonl(part: str) -> bool:
    """Whether a part of a prompt spec names a prompt file."""
    return part.strip().startswith(PREFIX)


def split_part(part: str) -> tuple[Path, int | None]:
    """`jsonl:PATH[:N]` → (PATH, N or None for the whole file); N below 1 and an empty PATH are refused."""
    rest = part.strip()[len(PREFIX):]
    match = _COUNT.match(rest)
    path, n = (match.group(1), int(match.group(2))) if match else (rest, None)
    if not path.strip():
        raise SpectreeError(f"prompt spec part {part.strip()!r} names no file: expected jsonl:PATH[:N], "
                            f"e.g. jsonl:questions.jsonl:8")
    if n is not None and n < 1:
        raise SpectreeError(f"prompt spec part {part.strip()!r} asks for {n} prompts: give a count >= 1, "
                            f"or jsonl:{path} for the whole file")
    return Path(path).expanduser(), n


def _existing(path: Path) -> Path:
    if not path.is_file():
        raise SpectreeError(f"prompt file {path} {'is a folder' if path.is_dir() else 'does not exist'}: "
                            f"jsonl:PATH names a file of JSON lines (relative paths start at {Path.cwd()})")
    return path


def _text_lines(path: Path) -> list[str]:
    try:
        return _existing(path).read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as err:
        raise SpectreeError(f"prompt file {path} is not UTF-8 text ({err.reason} at byte {err.start})") from None
    except OSError as err:
        raise SpectreeError(f"prompt file {path} cannot be read: {err.strerror or err}") from None


def _field(row: dict, name: str, types: tuple[type, ...], what: str) -> object:
    value = row.get(name)
    if value is not None and (isinstance(value, bool) or not isinstance(value, types)):
        raise ValueError(f'"{name}" must be {what}, got {type(value).__name__} {json.dumps(value)[:40]}')
    return value


def _prompt(row: object, stem: str, number: int) -> PromptRow:
    """The prompt of one parsed line (ValueError says what is wrong with it)."""
    if not isinstance(row, dict):
        raise ValueError(f"expected a JSON object, got {type(row).__name__}")
    if ("turns" in row) == ("prompt" in row):
        raise ValueError(f'expected "turns" (MT-bench) or "prompt", {"got both" if "turns" in row else "got neither"}'
                         f" (keys: {', '.join(map(str, row)) or 'none'})")
    if "turns" in row:
        turns = row["turns"]
        if not isinstance(turns, list) or not turns or not all(isinstance(t, str) for t in turns):
            raise ValueError(f'"turns" must be a non-empty list of strings, got {json.dumps(turns)[:40]}')
        text = turns[0]
    else:
        text = row["prompt"]
        if not isinstance(text, str):
            raise ValueError(f'"prompt" must be a string, got {type(text).__name__}')
    if not text.strip():
        raise ValueError("the prompt text is empty")
    qid = _field(row, "question_id", (int, str), "an integer or a string")
    pid = _field(row, "id", (int, str), "an integer or a string")
    category = _field(row, "category", (str,), "a string")
    ident = next((str(v) for v in (qid, pid) if v is not None), str(number))
    if not ident.strip():
        raise ValueError("the id is empty")
    return PromptRow(f"{PREFIX}{stem}", ident, category or stem, text)


def stem_of(path: Path) -> str:
    """The file's name without `.jsonl`, reduced to letters, digits, '_', '-' and '.' (for keys and tags)."""
    return _UNSAFE.sub("_", Path(path).name.removesuffix(".jsonl")).strip("._") or "prompts"


def read_prompt_file(path: str | Path, n: int | None = None) -> list[PromptRow]:
    """The first `n` prompts of a prompt file (all when None), each line checked; see the module's docstring."""
    path = Path(path)
    stem, prompts, seen = stem_of(path), [], {}
    for number, line in enumerate(_text_lines(path), start=1):
        if not line.strip():
            continue
        try:
            prompt = _prompt(json.loads(line), stem, number)
        except json.JSONDecodeError as err:
            raise SpectreeError(f"{path} line {number}: not JSON ({err.msg} at column {err.colno}); each line must "
                                f"hold {FORMATS}") from None
        except ValueError as err:
            raise SpectreeError(f"{path} line {number}: {err}; each line must hold {FORMATS}") from None
        if prompt.id in seen:
            raise SpectreeError(f"{path} line {number}: id {prompt.id!r} is already on line {seen[prompt.id]}; "
                                f"prompt ids must be unique within a file")
        seen[prompt.id] = number
        prompts.append(prompt)
    if not prompts:
        raise SpectreeError(f"prompt file {path} holds no prompts: give one JSON object a line, {FORMATS}")
    if n is not None and n > len(prompts):
        raise SpectreeError(f"{path} holds {len(prompts)} prompts, not {n}: ask for at most "
                            f"jsonl:{path}:{len(prompts)} (or jsonl:{path} for all)")
    return prompts if n is None else prompts[:n]


def identity_part(part: str, root: Path | None = None) -> str:
    """What a `jsonl:` spec part stands for in cache keys: the file's stem and a digest of its content, and the
    count (`jsonl-<stem>-<digest>[:N]`), so that editing the file changes the key and moving it does not. A
    relative PATH starts at `root` (default: the working directory)."""
    path, n = split_part(part)
    path = path if root is None else Path(root) / path
    ident = f"jsonl-{stem_of(path)}-{file_digest(_existing(path))}"
    return ident if n is None else f"{ident}:{n}"


__all__ = ["PREFIX", "PromptRow", "is_jsonl", "split_part", "read_prompt_file", "identity_part", "stem_of"]
