"""The one exception type users see for bad input, missing packages and corrupt files."""


class SpectreeError(ValueError):
    """Bad input or a missing/corrupt resource, with a message that says how to fix it."""
