"""Where the workbook keeps its files. `SPECTREE_HOME` overrides the repository root."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def home() -> Path:
    env = os.environ.get("SPECTREE_HOME")
    return Path(env) if env else Path(__file__).resolve().parents[3]


def data_dir() -> Path:
    return home() / "data"


def cache_dir() -> Path:
    return data_dir() / "cache"


def figures_dir() -> Path:
    return home() / "figures"


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
