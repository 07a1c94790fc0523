"""Where the workbook keeps its files (`SPECTREE_HOME` overrides the repository root), atomic writes, and the
checks of the files it ships."""
from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from pathlib import Path

from spectree.core.errors import SpectreeError


def home() -> Path:
    env = os.environ.get("SPECTREE_HOME")
    return Path(env) if env else Path(__file__).resolve().parents[3]


def data_dir() -> Path:
    return home() / "data"


ARTIFACTS = {"c2t": "C2T classifier", "drafts": "draft checkpoint"}  # data/<kind>/<name>.safetensors
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


def check_name(name: str, what: str) -> str:
    """`name` if it can name a file of `what` (a draft, a classifier, a logbook, a training run) inside its
    folder: letters, digits, '_', '-', '.', '+', never '/' or '..'. The one name check of every command."""
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        raise SpectreeError(f"bad {what} name {name!r}: use letters, digits, '_', '-', '.', '+' (no '/' or '..')")
    return name


def artifact_path(kind: str, name: str, suffix: str = ".safetensors") -> Path:
    """data/<kind>/<name><suffix>: a shipped or trained artifact (`kind` in ARTIFACTS), its name checked so that
    it cannot leave that folder."""
    if kind not in ARTIFACTS:
        raise ValueError(f"unknown artifact kind {kind!r}: use one of {sorted(ARTIFACTS)}")
    return data_dir() / kind / f"{check_name(name, ARTIFACTS[kind])}{suffix}"


def repair_hint(path: Path, rebuild: str = "delete it to rebuild") -> str:
    """How to fix a damaged file: a file git tracks (a shipped draft or classifier) is restored with
    `git checkout`; any other is rebuilt as `rebuild` says."""
    path = Path(path).absolute()
    try:
        tracked = subprocess.run(["git", "ls-files", "--error-unmatch", path.name], cwd=path.parent,
                                 capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):  # no git, or not a folder
        tracked = False
    if not tracked:
        return rebuild
    shown = path.relative_to(home().absolute()) if path.is_relative_to(home().absolute()) else path
    return f"restore it with `git checkout -- {shown}`"


def cache_dir() -> Path:
    return data_dir() / "cache"


def figures_dir() -> Path:
    return home() / "figures"


def atomic_write_npy(path: Path, array) -> None:
    """`np.save` of `array` to `path`, atomically (`atomic_write_bytes`)."""
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.save(buffer, array)
    atomic_write_bytes(path, buffer.getvalue())


def atomic_write_bytes(path: Path, payload: bytes) -> None:
    """Write to a temp file in the same folder, then rename: readers never see half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600 files; outputs should read like any other
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def check_safetensors(path: Path, rebuild: str = "delete it to rebuild") -> None:
    """One line for a file that is not a complete safetensors file, saying how to fix it (`repair_hint`)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            for name in f.keys():
                f.get_slice(name)
        size_ok = path.stat().st_size >= _safetensors_expected_size(path)
    except Exception as err:
        raise SpectreeError(f"{path} is not a readable safetensors file ({err}); {repair_hint(path, rebuild)}") from err
    if not size_ok:
        raise SpectreeError(f"{path} is truncated; {repair_hint(path, rebuild)}")


def _safetensors_expected_size(path: Path) -> int:
    with open(path, "rb") as f:
        header_len = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(header_len))
    ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
    return 8 + header_len + max(ends, default=0)
