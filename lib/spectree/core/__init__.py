"""The decoding core: the draft tree, policies and their one grow loop, tree attention and its KV cache, verification
and the generation loop (torch + numpy; no strategy, no model loading)."""
