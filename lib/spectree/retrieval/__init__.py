"""Model-free drafts: the committed text's suffix index (`index`), the proposers that read it (`proposers`: prompt
lookup, suffix counts), the grafting of their branches into any policy's draft tree (`graft`) and their τ and γ
read off a greedy generation without a model (`walk`)."""
