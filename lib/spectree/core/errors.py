"""The one exception type users see for bad input, missing packages and corrupt files."""


class SpectreeError(ValueError):
    """Bad input or a missing/corrupt resource, with a message that says how to fix it."""


class TreeTooLarge(SpectreeError):
    """A policy asked for more draft-tree nodes than the decoder allows (`Policy.max_nodes`)."""
