"""Models named by the user: a local folder or an HF hub id in the local HF cache (never downloaded, never
remote code), the precision and device they load on, the named presets of params/pairs.yaml, and the tokenizer
check of a standalone `hf:` draft against its target (from tokenizers and configs alone, before any weights load).
"""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from typing import Optional, Union

import torch
from transformers import AutoConfig, AutoTokenizer, PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

from spectree.core.errors import SpectreeError
from spectree.core.paths import home

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
# a few sentences with code, digits, whitespace runs and non-Latin text: two tokenizers that give the same ids here
# (and for the target's EOS token) split text the same way
PROBE = ("The quick brown fox jumps over the lazy dog. It's 3.14 — isn't it?\n"
         "def add(a, b):\n    return a + b  # sum\n\tif x != y: print(f\"{x}\")\n"
         "Zürich, naïve café, Москва, 東京, 🙂 ok.")


# --- precision and device -------------------------------------------------------------------------------------

def resolve_device(device: Optional[str] = None) -> str:
    """'auto' / None: cuda when present, else cpu; anything else must name a torch device."""
    if device in (None, "auto"):
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        torch.device(device)
    except (RuntimeError, TypeError) as err:
        raise SpectreeError(f"bad device '{device}': use auto, cpu, cuda, cuda:N or mps ({err})") from None
    return str(device)


def resolve_dtype(dtype: Union[str, torch.dtype, None] = "auto", device: Optional[str] = None) -> torch.dtype:
    """'auto' / None: bfloat16 on CUDA, float32 elsewhere; else one of DTYPES (by name or as a torch dtype)."""
    if dtype in (None, "auto"):
        return torch.bfloat16 if resolve_device(device).startswith("cuda") else torch.float32
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    raise SpectreeError(f"bad dtype '{dtype}': use auto, {', '.join(DTYPES)}")


def placement(device: Optional[str]) -> dict:
    """from_pretrained's placement: accelerate's device_map='auto' (a target larger than one GPU spreads over
    them all) when the device is 'auto' and CUDA is present; else {} (the caller moves the model)."""
    return {"device_map": "auto"} if device in (None, "auto") and torch.cuda.is_available() else {}


# --- folders and hub ids --------------------------------------------------------------------------------------

def model_folder(name: str, what: str = "model") -> Path:
    """The folder of a model given as a local folder or as an HF hub id found in the local HF cache (a lookup
    that never downloads); one error naming the fix otherwise."""
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise SpectreeError(f"{what} '{name}' is not a model folder: it has no config.json")
        return path
    if _HUB_ID.match(name):
        from huggingface_hub import snapshot_download

        try:
            folder = Path(snapshot_download(name, local_files_only=True))
        except Exception:  # not cached (LocalEntryNotFoundError), or a name the hub refuses (HFValidationError)
            folder = None
        if folder is not None and (folder / "config.json").is_file():
            return folder
        raise SpectreeError(f"{what} '{name}' is neither a local folder nor in the Hugging Face cache: download it "
                            f"with `huggingface-cli download {name}` (nothing is downloaded here)")
    raise SpectreeError(f"{what} '{name}': no such folder")


IDENTITY_FILES = ("*.safetensors", "*.bin", "*.json", "tokenizer.model")  # weights, configs, tokenizer
HASHED_MAX = 2 << 30  # larger files stand in a model's identity by size and mtime (hashing them takes minutes)


def model_identity(name: str) -> str:
    """What a model folder or hub id holds, so that results made with other weights under the same name are told
    apart: a hub snapshot by its id and resolved snapshot (its folder name is the commit hash); a local folder by
    a digest of its weights, configs and tokenizer files (`core.manifest.file_digest`; a file over 2 GiB by its
    name, size and mtime instead)."""
    path = Path(name).expanduser()
    folder = model_folder(name)
    if not path.exists():
        return f"{name}@{folder.name}"
    return _folder_digest(folder.resolve(), tuple(
        (f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in _identity_files(folder)))


def _identity_files(folder: Path) -> list[Path]:
    return sorted({f for pattern in IDENTITY_FILES for f in folder.glob(pattern) if f.is_file()})


@lru_cache(maxsize=16)
def _folder_digest(folder: Path, stats: tuple) -> str:
    """file_digest of a folder's identity files (memoised on their names, sizes and mtimes)."""
    from spectree.core.manifest import digest, file_digest

    small = [folder / n for n, size, _ in stats if size <= HASHED_MAX]
    large = [s for s in stats if s[1] > HASHED_MAX]
    return digest([file_digest(*small) if small else "", [n for n, *_ in stats if n not in {s[0] for s in large}],
                   large])


def check_weights(folder: Path, name: str, what: str = "model") -> None:
    """A model folder holds its weights (safetensors or a torch .bin, whole or sharded)."""
    if not any((folder / w).is_file() for w in WEIGHTS):
        raise SpectreeError(f"{what} '{name}' ({folder}) has no weights: expected one of {', '.join(WEIGHTS)}")


def eagle_folder(name: str) -> Path:
    """An EAGLE head's folder (local, or a hub id in the HF cache) holding config.json and its weights."""
    folder = model_folder(name, "EAGLE head")
    if not any((folder / w).is_file() for w in ("model.safetensors", "pytorch_model.bin")):
        raise SpectreeError(f"EAGLE head '{name}' ({folder}) has no weights: expected model.safetensors or "
                            f"pytorch_model.bin")
    return folder


def read_tokenizer(folder: Path, name: str) -> tuple[PreTrainedTokenizerBase, PretrainedConfig]:
    """A model folder's tokenizer and config, without its weights (never remote code)."""
    try:
        return (AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False),
                AutoConfig.from_pretrained(str(folder), trust_remote_code=False))
    except (OSError, ValueError) as err:
        raise SpectreeError(f"cannot read model '{name}': {str(err).splitlines()[0]}") from err


def load_folder(folder: Path, name: str, device: Optional[str], dtype: torch.dtype) -> PreTrainedModel:
    """A causal LM from a model folder in `dtype`: on `device`, or over every GPU for device 'auto' with CUDA."""
    from transformers import AutoModelForCausalLM

    check_weights(folder, name)
    where = placement(device)
    try:
        model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=dtype, trust_remote_code=False, **where)
    except (OSError, ValueError) as err:
        raise SpectreeError(f"cannot load model '{name}': {str(err).splitlines()[0]}") from err
    return (model if where else model.to(resolve_device(device))).eval()


# --- presets --------------------------------------------------------------------------------------------------

def presets(builtin: dict) -> dict[str, tuple[str, str]]:
    """{name: (target, draft)} from params/pairs.yaml (none without the file); a preset named like a built-in
    pair, or not of the form {target: ..., draft: ...}, is refused."""
    import yaml

    path = home() / "params" / "pairs.yaml"
    if not path.exists():
        return {}
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise SpectreeError(f"{path} is not valid YAML: {str(err).splitlines()[0]}") from None
    out = {}
    for name, entry in (raw.items() if isinstance(raw, dict) else [(None, raw)]):
        if not (isinstance(entry, dict) and isinstance(entry.get("target"), str) and isinstance(entry.get("draft"), str)):
            raise SpectreeError(f"{path}: preset {name!r} must be {{target: TARGET, draft: DRAFT}}, got {entry!r}")
        if name in builtin:
            raise SpectreeError(f"{path}: preset '{name}' has the name of a built-in pair; rename it")
        out[str(name)] = (entry["target"], entry["draft"])
    return out


# --- a standalone draft against its target ---------------------------------------------------------------------

def check_tokenizers(target: str, target_tok: tuple, draft: str, draft_tok: tuple) -> None:
    """A standalone draft must split text into the target's ids: the same config.vocab_size (or, where one
    embedding is padded larger, tokenizers of the same size that fit both) and the same ids for PROBE plus the
    target's EOS token. Each argument pair: a name and its (tokenizer, config)."""
    (tok_t, cfg_t), (tok_d, cfg_d) = target_tok, draft_tok
    v_t, v_d, n_t, n_d = cfg_t.vocab_size, cfg_d.vocab_size, len(tok_t), len(tok_d)
    what = f"the draft '{draft}' does not share the tokenizer of the target '{target}'"
    if v_t != v_d and not (n_t == n_d <= min(v_t, v_d)):
        raise SpectreeError(f"{what}: vocab_size {v_d} vs {v_t} (tokenizers of {n_d} vs {n_t} tokens)")
    text = PROBE + (tok_t.eos_token or "")
    ids_t = tok_t(text, add_special_tokens=False).input_ids
    ids_d = tok_d(text, add_special_tokens=False).input_ids
    if ids_t != ids_d:
        i = next((i for i, (a, b) in enumerate(zip(ids_t, ids_d)) if a != b), min(len(ids_t), len(ids_d)))
        near = tok_t.decode(ids_t[max(0, i - 3): i + 3])
        raise SpectreeError(f"{what}: a probe text gets other token ids from token {i} on (near {near!r}: "
                            f"{ids_d[i:i + 3]} vs the target's {ids_t[i:i + 3]}; {len(ids_d)} vs {len(ids_t)} ids)")


def fit_vocab(draft: PreTrainedModel, vocab: int) -> PreTrainedModel:
    """A draft whose head covers another number of ids than the target's (embedding padding) made to score
    exactly the target's `vocab` ids: a padded-larger head is cut to its first `vocab` rows; a smaller one keeps
    its ids and gives the target's extra (padding) ids the row's lowest logit minus a gap (`edd.ReducedHead`)."""
    from spectree.drafts.edd import ReducedHead

    head = draft.get_output_embeddings()
    have = head.weight.shape[0]
    if have > vocab:
        cut = torch.nn.Linear(head.weight.shape[1], vocab, bias=False, device=head.weight.device,
                              dtype=head.weight.dtype).requires_grad_(False)
        cut.weight.data = head.weight.detach()[:vocab].clone()  # [vocab, H]
        draft.set_output_embeddings(cut)
    elif have < vocab:
        padded = ReducedHead(head, torch.arange(have))
        padded.vocab = vocab  # logits [..., vocab]
        draft.set_output_embeddings(padded)
    return draft
