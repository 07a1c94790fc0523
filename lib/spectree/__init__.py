"""spectree: dynamic-tree speculative decoding, reproduced on a real model pair. Each folder holds one concern and
every name is imported from the module that defines it (docs/layout.md)."""
