"""Small builders shared by the tests."""
from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from spectree.core.tree import DraftTree, Nodes

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


def tiny_llama(seed: int = 0, layers: int = 2, vocab: int = 97) -> LlamaForCausalLM:
    """A random tiny Llama (sdpa attention) for fast shape / mask / bookkeeping tests."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    cfg._attn_implementation = "sdpa"
    return LlamaForCausalLM(cfg).eval()
