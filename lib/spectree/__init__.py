"""spectree: dynamic-tree speculative decoding, reproduced on a real model pair."""
from spectree.core.decode import Generation, speculative_generate
from spectree.core.errors import SpectreeError
from spectree.core.sampling import Sampling
from spectree.core.tree import DraftTree, Nodes
from spectree.core.verify import Verdict, verify

__all__ = ["DraftTree", "Generation", "Nodes", "Sampling", "SpectreeError", "Verdict", "speculative_generate", "verify"]
