"""Small builders shared by the tests."""
from __future__ import annotations

import json
import os
from typing import Callable, Optional

import numpy as np
import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from spectree.core.groups import sibling_order
from spectree.core.offers import append_offers
from spectree.core.policy import Growth, NodeTable, Rows, grow
from spectree.core.tree import DraftTree, Nodes

# one setting of every registered policy but ar and c2t (small trees: fast on a tiny model)
POLICY_SPECS = ["chain:k=3", "chain:k=4,stop=entropy,threshold=1.0", "chain:k=4,stop=dymax,threshold=0.3",
                "chain:k=4,stop=dyjoint,threshold=0.08", "sequences:k=3,d=3", "sequoia:n=6,p=0.6/0.2/0.1", "vct:w=2,d=3",
                "kary:b=2,d=3", "entropy:d=3", "entropy:d=4,cutoff=4.4", "naive_width:k=3,d=3", "eagle2:K=3,d_max=4,N=8",
                "dyspec:m=10,K=3,d_max=4", "dyspec_threshold:t=0.02,K=3,d_max=4", "pct:ratio=0.05,k=3,d_max=4",
                "cape:d=3", "sglang:steps=3,topk=3,tokens=8", "trtllm:layers=3,topk=3,tokens=6",
                "choices:paths=0/1/0.0/0.1/1.0/0.0.0"]

#        0
#      1   2
#     3 4   5
#     6
PARENTS = [-1, 0, 0, 1, 1, 2, 3]


def make_tree(parents: list[int], prefix_len: int = 10) -> DraftTree:
    """A tree with the given parent list (index 0 = root), token 100 + i at node i."""
    tree = DraftTree.root(100, prefix_len)
    for i, p in enumerate(parents[1:], start=1):
        one = torch.ones(1)
        tree.add(Nodes(tokens=torch.tensor([100 + i]), parents=torch.tensor([p]),
                       depth=tree.depth[p:p + 1] + 1, draft_prob=one * 0.5, joint=tree.joint[p:p + 1] * 0.5,
                       entropy=one, entropy_topm=one, rank=torch.tensor([0]), confidence=one))
    return tree


class ToyChat:
    """Stands in for a tokenizer: prompt text 'x' is [3, 4, 5], any other [7, 8]."""

    eos_token_id = 1

    def apply_chat_template(self, messages, add_generation_prompt=True):
        return [3, 4, 5] if messages[0]["content"] == "x" else [7, 8]


def tiny_llama(seed: int = 0, layers: int = 2, vocab: int = 97, context: int = 256) -> LlamaForCausalLM:
    """A random tiny Llama (sdpa attention) for fast shape / mask / bookkeeping tests; `context`: its
    max_position_embeddings."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=context)
    cfg._attn_implementation = "sdpa"
    return LlamaForCausalLM(cfg).eval()


# --- policies on hand-made nodes (the same `Rows` view live drafting and replay give them) ---------------------

def _table(tree: DraftTree) -> NodeTable:
    return NodeTable({f: t.numpy().copy() for f, t in tree.columns().items()}, np.zeros(len(tree), dtype=np.int64), 1)


def select_on(policy, cand: Nodes, tree: Optional[DraftTree] = None) -> np.ndarray:
    """`policy.select` on hand-made candidates, children of the nodes of `tree` (default: a bare root)."""
    table = _table(tree if tree is not None else DraftTree.root(0, 5))
    kept = np.ones(len(table), dtype=bool)
    rows = table.append({f: t.numpy() for f, t in cand.columns().items()})
    growth = Growth(table, grown=kept)
    growth.fit()
    return policy.select(Rows(growth, rows), growth.rows(growth.grown))


def frontier_rows(tree: DraftTree, nodes) -> Rows:
    """Nodes [f] of a hand-made tree as the frontier rows `child_candidates` reads."""
    return Rows(Growth(_table(tree), grown=np.ones(len(tree), dtype=bool)), np.asarray(nodes))


def expand_on(policy, tree: DraftTree, new: torch.Tensor) -> np.ndarray:
    """`policy.expand` on the nodes `new` of a hand-made tree."""
    growth = Growth(_table(tree), grown=np.ones(len(tree), dtype=bool))
    return policy.expand(Rows(growth, new.numpy()), growth.rows(growth.grown))


def finalize_on(policy, tree: DraftTree) -> np.ndarray:
    """`policy.finalize` on a hand-made tree."""
    growth = Growth(_table(tree), grown=np.ones(len(tree), dtype=bool))
    return policy.finalize(growth.rows(growth.grown))


Offer = Callable[[DraftTree, torch.Tensor], Nodes]  # (every row so far, frontier [f]) → candidate children


def grow_offline(policy, offer: Offer, root: Optional[DraftTree] = None) -> DraftTree:
    """The tree `policy` grows (through the real `core.policy.grow`) when `offer` proposes the children; its
    `offered`: the children offered the policy (those its `limit` let through), as live drafting counts them."""
    table = _table(root if root is not None else DraftTree.root(0, 5))

    def every_row() -> DraftTree:
        return DraftTree(**{f: torch.from_numpy(c) for f, c in table.cols.items()}, prefix_len=5)

    def propose(frontier: Rows) -> np.ndarray:
        cand = offer(every_row(), torch.from_numpy(frontier.idx))
        cand = cand.take(torch.from_numpy(sibling_order(cand.parents.numpy()) < policy.width(frontier)))  # as live
        return append_offers(frontier, policy, {f: t.numpy() for f, t in cand.columns().items()})  # as live

    growth = grow(table, policy, propose)
    tree = every_row().subtree(torch.from_numpy(growth.kept))
    tree.offered = len(table) - len(root if root is not None else [0])
    return tree


Path = tuple[int, ...]  # a node as the ranks of its path from the root (the root is ())


def synthetic_draft(probs: Callable[[Path], list[float]], entropy: Callable[[Path], float] = lambda path: 1.0,
                    K: int = 99) -> Offer:
    """An `Offer` for `grow_offline` from a made-up greedy draft: node `path` offers its first K children, the i-th
    with probability probs(path)[i] (descending: the ranks in order), all carrying entropy(path) and confidence
    probs(path)[0] — the features a draft model's distribution at `path` gives them. Token ids are path codes."""
    paths: list[Path] = [()]

    def offer(every: DraftTree, frontier: torch.Tensor) -> Nodes:
        rows = []
        for u in frontier.tolist():
            while len(paths) < len(every):  # the rows appended since the last call, in order
                paths.append(paths[int(every.parents[len(paths)])] + (int(every.rank[len(paths)]),))
            p = probs(paths[u])[:K]
            rows += [(u, i, q, float(every.joint[u]) * q, entropy(paths[u]), p[0]) for i, q in enumerate(p)]
        u, rank, q, joint, h, conf = (torch.tensor(c) for c in zip(*rows)) if rows else [torch.zeros(0)] * 6
        n = len(rows)
        return Nodes(tokens=1000 + torch.arange(len(every), len(every) + n), parents=u.long(),
                     depth=every.depth[u.long()] + 1, draft_prob=q.float(), joint=joint.float(),
                     entropy=h.float(), entropy_topm=h.float(), rank=rank.long(), confidence=conf.float())
    return offer


def tree_paths(tree: DraftTree) -> set[Path]:
    """The nodes of a tree grown from `synthetic_draft`, as rank paths (the root left out)."""
    paths: list[Path] = [()]
    for i in range(1, len(tree)):
        paths.append(paths[int(tree.parents[i])] + (int(tree.rank[i]),))
    return set(paths[1:])


def stand_in_draft(home, name: str, value: float = 1.0) -> None:
    """A whole VDM checkpoint file data/drafts/<name>.safetensors (never loaded: only its bytes count)."""
    from safetensors.torch import save_file

    (home / "data/drafts").mkdir(parents=True, exist_ok=True)
    save_file({"w": torch.full((2,), value)}, str(home / f"data/drafts/{name}.safetensors"), metadata={"kind": "vdm"})


# --- refusals: one line, before any model loads and before anything is written ---------------------------------

# every model loader, where it is defined (`monkeypatch.setattr(LOADER, ...)`)
LOADERS = ("spectree.models.loading.load_pair", "spectree.models.pairs.load_target",
           "spectree.models.loading.load_draft", "spectree.models.loading.load_trained_draft")


def no_model(*args, **kwargs):
    raise AssertionError("a model was loaded")


def offline_home(tmp_path, monkeypatch):
    """An empty SPECTREE_HOME (the cached target linked in, for its tokenizer and config) where no model loads:
    every loader raises."""
    from spectree.core.paths import cache_dir

    models = cache_dir() / "models"
    root = tmp_path / "home"
    (root / "data" / "cache").mkdir(parents=True)
    if models.exists():
        (root / "data" / "cache" / "models").symlink_to(models)
    monkeypatch.setenv("SPECTREE_HOME", str(root))
    for loader in LOADERS:
        monkeypatch.setattr(loader, no_model)
    return root


def files(root) -> set:
    return {os.path.join(d, f) for d, _, names in os.walk(root) for f in names}


def refuse(argv, capsys, root=None) -> str:
    """Run the CLI; it must exit with 2, print exactly one line on stderr and write nothing under `root`."""
    from spectree.cli import main

    before = files(root) if root else None
    try:
        code = main(argv)
    except SystemExit as stop:  # argparse's refusals
        code = stop.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("spectree: error: "), err
    if root:
        assert files(root) == before
    return err


# --- EAGLE heads in EAGLE's checkpoint format (tests/drafts) -----------------------------------------------------

def eagle_config(target, **over) -> dict:
    """A head config.json as EAGLE ships one (a Llama config with one layer)."""
    c = target.config
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu", "bias": True,
           "hidden_size": c.hidden_size, "intermediate_size": 48, "num_attention_heads": c.num_attention_heads,
           "num_key_value_heads": c.num_key_value_heads, "num_hidden_layers": 1, "rms_norm_eps": 1e-6,
           "max_position_embeddings": 2048, "rope_theta": 10000.0, "vocab_size": c.vocab_size,
           "tie_word_embeddings": False, "torch_dtype": "float16", "transformers_version": "4.28.1"}
    return {**cfg, **over}


def eagle_weights(target, seed: int = 0, inter: int = 48, embed: bool = False) -> dict[str, torch.Tensor]:
    """Random head tensors under EAGLE's names (layer 0 has no input_layernorm)."""
    g = torch.Generator().manual_seed(seed)
    c = target.config
    H, d = c.hidden_size, c.hidden_size // c.num_attention_heads
    kv = c.num_key_value_heads * d

    def w(*shape, scale=None):  # unit-scale activations: std 1/sqrt(fan-in)
        return torch.randn(*shape, generator=g) * (scale if scale is not None else shape[-1] ** -0.5)

    out = {"fc.weight": w(H, 2 * H), "fc.bias": w(H, scale=0.1),
           "layers.0.self_attn.q_proj.weight": w(H, H), "layers.0.self_attn.k_proj.weight": w(kv, H),
           "layers.0.self_attn.v_proj.weight": w(kv, H), "layers.0.self_attn.o_proj.weight": w(H, H),
           "layers.0.mlp.gate_proj.weight": w(inter, H), "layers.0.mlp.up_proj.weight": w(inter, H),
           "layers.0.mlp.down_proj.weight": w(H, inter),
           "layers.0.post_attention_layernorm.weight": 1 + w(H, scale=0.1)}
    if embed:
        out["embed_tokens.weight"] = target.get_input_embeddings().weight.detach().clone()
    return out


def write_head(folder, config: dict, weights: dict, fmt: str = "safetensors"):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config))
    if fmt == "safetensors":
        save_file({k: v.contiguous() for k, v in weights.items()}, str(folder / "model.safetensors"))
    else:
        torch.save(weights, folder / "pytorch_model.bin")
    return folder


# --- a pair of the user's own: two tiny random Llamas in folders, sharing a byte-level tokenizer -------------------

SPECIALS = ["<unk>", "<s>", "</s>"]  # ids 0, 1, 2: LlamaConfig's bos / eos defaults
CHAT = ("{% for m in messages %}<s>{{ m['role'] }}\n{{ m['content'] }}</s>{% endfor %}"
        "{% if add_generation_prompt %}<s>assistant\n{% endif %}")


def byte_tokenizer(shift: int = 0, extra: int = 0) -> PreTrainedTokenizerFast:
    """A byte-level tokenizer: 3 specials, the 256 byte symbols (rotated by `shift`: other ids for the same text),
    then `extra` unused tokens; with a chat template."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    alphabet = alphabet[shift:] + alphabet[:shift]
    vocab = {t: i for i, t in enumerate(SPECIALS + alphabet + [f"x{i}" for i in range(extra)])}
    tk = Tokenizer(models.BPE(vocab, [], unk_token="<unk>"))
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
    tok.chat_template = CHAT
    return tok


def save_model(folder, seed: int, layers: int, tok: PreTrainedTokenizerFast, vocab: int = None, context: int = 256):
    model = tiny_llama(seed, layers=layers, vocab=vocab or len(tok), context=context)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def own_pair_folders(root, seed: int = 0, context: int = 256):
    """(target folder, draft folder) of a compatible pair under `root`: a 3-layer and a 1-layer random Llama
    (`context`: their max_position_embeddings; byte-level prompts of the built-in sets need a few thousand)."""
    tok = byte_tokenizer()
    return (save_model(root / "target", seed, 3, tok, context=context),
            save_model(root / "draft", seed + 1, 1, tok, context=context))


class Chat:
    """Chat template and tokenizer of a few in-vocabulary ids per text; `name_or_path` names it."""

    pad_token_id, eos_token_id, name_or_path = 0, 1, "tok-a"

    def apply_chat_template(self, messages, add_generation_prompt=True, tokenize=True):
        text = " ".join(m["content"] for m in messages)
        return text if not tokenize else self(text)["input_ids"][:8]

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [3 + ord(c) % 90 for c in text]}
