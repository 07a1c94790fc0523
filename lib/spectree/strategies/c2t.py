"""C2T (Alg. 1): a tiny classifier over (P, H, d) decides which draft nodes join the tree."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import torch

from spectree.core.policy import Policy
from spectree.core.tree import DraftTree, Nodes
from spectree.strategies.eagle2 import top_by_joint


@dataclass
class C2TPolicy(Policy):
    classifier: Optional[torch.nn.Module] = field(default=None, repr=False)
    beta: float = 0.5  # β: keep a node if its confidence C = F(P, H, d) exceeds β
    topk: int = 0  # second pruning: at most this many draft nodes in the tree, the most confident first (0 = off)

    name = "c2t"
    features = frozenset({"entropy_topm"})  # its H is the entropy over the top-M probabilities
    probabilities = ("beta",)

    def select(self, cand: Nodes, tree: DraftTree) -> torch.Tensor:
        first = top_by_joint(cand.joint, cand.depth, self.K)  # topK(M_d(N)): the K likeliest children
        conf = self.classifier.confidence(cand)
        keep = first & (conf > self.beta)
        room = self.topk - (len(tree) - 1)  # tree budget left; filled layer by layer, so it stays connected
        if self.topk and int(keep.sum()) > room:
            conf = torch.where(keep, conf, torch.full_like(conf, -1.0))
            keep = torch.zeros_like(keep)
            keep[conf.topk(max(room, 0)).indices] = True
        return keep


def c2t_policy(beta: float = 0.5, K: int = 10, d_max: int = 11, topk: int = 0,
               classifier: str = "smollm2-edd") -> C2TPolicy:
    """C2T with the classifier shipped as data/c2t/<classifier>.safetensors."""
    from spectree.core.paths import data_dir
    from spectree.strategies.c2t_classifier import load_classifier

    policy = C2TPolicy(K=K, d_max=d_max, beta=beta, topk=topk)  # validates β before loading anything
    policy.classifier = load_classifier(data_dir() / "c2t" / f"{classifier}.safetensors")
    return policy
