"""What a cached result was made from, recorded beside it, and reused only when a run asks for the same.

A manifest is a JSON object of named keys (prompts, pair, parameters, a code version where it matters), written
atomically at `<folder>/manifest.json` for a folder (`inside`) or at `<file>.manifest.json` beside a file
(`beside`). Two ways to use one, chosen per cache:

- `check_manifest` (`resume_or_refuse` for a folder built step by step): a result someone named (`train
  --name`, `log --name`) is never replaced behind their back; another request under the same name is refused
  in one line that shows the differing keys, old and new.
- `reuse_or_rebuild` (one file or result) and `resume_or_restart` (a folder built step by step): an internal
  cache keyed by its content is rebuilt when it was made from something else (one note on stderr says why); the
  old manifest goes first, so a build that dies half-way is never taken for the old result.

A folder built step by step (a logbook, a training state) records its manifest before its first step, so every
later step resumes something whose origin is known.
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

from spectree.core.errors import SpectreeError
from spectree.core.paths import atomic_write_text, home

MANIFEST = "manifest.json"
T = TypeVar("T")


def inside(folder: Path) -> Path:
    """The manifest of a folder artifact."""
    return Path(folder) / MANIFEST


def beside(file: Path) -> Path:
    """The manifest of a file artifact."""
    file = Path(file)
    return file.with_name(f"{file.name}.manifest.json")


def artifact_of(manifest: Path) -> Path:
    """The artifact a manifest describes (the folder it sits in, or the file it sits beside)."""
    manifest = Path(manifest)
    if manifest.name == MANIFEST:
        return manifest.parent
    return manifest.with_name(manifest.name.removesuffix(".manifest.json"))


def normalized(wanted: dict) -> dict:
    """`wanted` as it reads back from JSON (tuples become lists, keys strings), so records compare equal."""
    return json.loads(json.dumps(wanted, sort_keys=True, default=str))


def read_json_object(path: Path, what: str = "a manifest", hint: str = "") -> dict:
    """The JSON object in `path`; an unreadable file or another JSON value is one SpectreeError (+ `hint`)."""
    try:
        value = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise SpectreeError(f"{shown(path)} is unreadable ({err}){hint}") from err
    if not isinstance(value, dict):
        raise SpectreeError(f"{shown(path)} is not {what} (a JSON object){hint}")
    return value


def read_manifest(path: Path) -> Optional[dict]:
    """The recorded keys, or None when there is no manifest (an unreadable one is a SpectreeError)."""
    return read_json_object(path) if Path(path).exists() else None


def write_manifest(path: Path, wanted: dict) -> None:
    atomic_write_text(path, json.dumps(normalized(wanted), indent=1, sort_keys=True) + "\n")


_ABSENT = object()


def differences(old: dict, new: dict) -> list[str]:
    """The keys whose values differ (or that only one side has), sorted."""
    old, new = normalized(old), normalized(new)
    return sorted(k for k in set(old) | set(new) if old.get(k, _ABSENT) != new.get(k, _ABSENT))


def _value(record: dict, key: str) -> str:
    if key not in record:
        return "(not recorded)"
    value = record[key]
    if isinstance(value, list) and len(json.dumps(value)) > 60:  # e.g. prompt keys: count, first ones, digest
        head = ", ".join(str(v) for v in value[:2])
        return f"[{len(value)}: {head}, … #{digest(value)[:6]}]"
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 60 else f"{text[:57]}…"


def mismatch(old: dict, new: dict, keys: list[str]) -> str:
    """'lr=0.001, seed=0; this run asks lr=0.002, seed=1' for the differing `keys`."""
    old, new = normalized(old), normalized(new)
    before = ", ".join(f"{k}={_value(old, k)}" for k in keys)
    after = ", ".join(f"{k}={_value(new, k)}" for k in keys)
    return f"{before}; this run asks {after}"


def shown(path: Path) -> str:
    """A path as messages show it: relative to the workbook's home when inside it."""
    path = Path(path)
    try:
        return str(path.resolve().relative_to(home().resolve()))
    except ValueError:
        return str(path)


def check_manifest(path: Path, wanted: dict, fix: str, legacy: Optional[dict] = None) -> bool:
    """Whether the artifact of manifest `path` was made from `wanted` (True) or nothing is recorded (False: a
    new artifact; the caller records `wanted` before building it). Made from anything else: one SpectreeError
    naming the differing keys with old and new values, then `fix`. `legacy`: what an artifact that predates
    manifests is taken to record (None: such an artifact counts as new)."""
    try:
        old = read_manifest(path)
    except SpectreeError as err:
        raise SpectreeError(f"{err}: {fix}") from err
    old = legacy if old is None else old
    if old is None:
        return False
    keys = differences(old, wanted)
    if keys:
        raise SpectreeError(f"{shown(artifact_of(path))} was made with {mismatch(old, wanted, keys)}: {fix}")
    return True


def resume_or_refuse(folder: Path, wanted: dict, made: bool, fix: str, legacy: Optional[dict] = None) -> None:
    """For a named folder built step by step (a logbook, a training state), before its next step: once steps are
    `made`, refuse (`check_manifest`) unless its manifest (else `legacy`) records `wanted` — and refuse steps of
    unrecorded origin too; before any step, record `wanted` (replacing a record nothing was made from)."""
    path = inside(folder)
    if made:
        if not check_manifest(path, wanted, fix, legacy):
            raise SpectreeError(f"{shown(folder)} holds results of unrecorded settings: {fix}")
        if path.exists():
            return
    write_manifest(path, wanted)


def matches(path: Path, wanted: dict) -> bool:
    """Whether manifest `path` records exactly `wanted` (no manifest, or an unreadable one: False)."""
    old = _old(path)
    return old is not None and not differences(old, wanted)


def reuse_or_rebuild(path: Path, wanted: dict, load: Callable[[], Optional[T]], build: Callable[[], T]) -> T:
    """`load()` when manifest `path` records `wanted` and `load` finds a usable artifact (not None); otherwise
    the manifest is removed, `build()` makes the artifact (atomically) and `wanted` is recorded after it."""
    if _current(path, wanted):
        found = load()
        if found is not None:
            return found
    Path(path).unlink(missing_ok=True)
    made = build()
    write_manifest(path, wanted)
    return made


def resume_or_restart(path: Path, wanted: dict, clear: Callable[[], None], legacy: Optional[dict] = None) -> bool:
    """For a folder built step by step that may be rebuilt: True when manifest `path` (else `legacy`) records
    `wanted` (resume its steps); otherwise `clear()` removes the steps, `wanted` is recorded first, and False."""
    if _current(path, wanted, legacy):
        if not Path(path).exists():
            write_manifest(path, wanted)
        return True
    Path(path).unlink(missing_ok=True)
    clear()
    write_manifest(path, wanted)
    return False


def _current(path: Path, wanted: dict, legacy: Optional[dict] = None) -> bool:
    """Whether manifest `path` (else `legacy`) records `wanted`; a difference is noted on stderr (it will be
    rebuilt)."""
    old = _old(path, legacy)
    if old is None:
        return False
    keys = differences(old, wanted)
    if keys:
        print(f"rebuilding {shown(artifact_of(path))}: it was made with {mismatch(old, wanted, keys)}",
              file=sys.stderr)
    return not keys


def _old(path: Path, legacy: Optional[dict] = None) -> Optional[dict]:
    """The record of manifest `path` (else `legacy`); an unreadable one reads as {}, which differs from any."""
    try:
        old = read_manifest(path)
    except SpectreeError:
        return {}
    return legacy if old is None else old


def digest(value: Any) -> str:
    """A short content hash of a JSON-able value (prompt texts, a vocabulary)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:16]


def file_digest(*paths: Path) -> str:
    """A short content hash of files (a draft checkpoint and its token ranking), in the order given."""
    h = hashlib.sha256()
    for p in paths:
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()[:16]


def source_name(model: Any) -> str:
    """The name a model or tokenizer was loaded by, without its folder ('smollm2-135m-instruct' for the cached
    target wherever SPECTREE_HOME is); '' for one built in memory."""
    return Path(str(getattr(model, "name_or_path", "") or "")).name


__all__ = ["MANIFEST", "inside", "beside", "read_manifest", "write_manifest", "differences", "mismatch",
           "check_manifest", "resume_or_refuse", "matches", "reuse_or_rebuild", "resume_or_restart", "digest",
           "file_digest", "source_name", "shown"]
