"""The models a pair loads: its target (the shipped GGUF, or a user's folder, hub id or GGUF file: `targets`,
`gguf`), the pair by name or spec and its checks before any weights load (`pairs`), the loaders (`loading`), whether a
notebook part applies to a pair (`applies`) and random-weight pairs of real shapes (`random_pairs`)."""
