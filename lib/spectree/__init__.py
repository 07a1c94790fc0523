"""spectree: dynamic-tree speculative decoding, reproduced on a real model pair."""
from .decode import Generation, speculative_generate
from .errors import SpectreeError
from .sampling import Sampling
from .tree import DraftTree, Nodes
from .verify import Verdict, verify

__all__ = ["DraftTree", "Generation", "Nodes", "Sampling", "SpectreeError", "Verdict", "speculative_generate", "verify"]
