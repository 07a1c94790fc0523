"""Model-free drafts: the committed text's suffix index (`index`), the proposers that read it (`proposers`: prompt
lookup, suffix counts) and the grafting of their branches into any policy's draft tree (`graft`)."""
from spectree.retrieval.graft import Grafter, graft, graft_columns, proposals
from spectree.retrieval.index import ContextIndex
from spectree.retrieval.proposers import RETRIEVERS, Branch, Lookup, Retrieval, Suffix

__all__ = ["ContextIndex", "Branch", "Retrieval", "Lookup", "Suffix", "RETRIEVERS", "Grafter", "graft", "graft_columns",
           "proposals"]
