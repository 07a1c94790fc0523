"""τ and γ, defined once.

τ (accept length) = accepted draft tokens + 1 (the bonus token the target adds): tokens committed per
target forward. C2T reports accepted draft tokens without the +1; convert with `tau - 1`.
γ (candidates) = draft tokens sent to one target verification = tree size without the root.
"""


def tau(n_accepted: int) -> int:
    return n_accepted + 1


def gamma(tree_size: int) -> int:
    return tree_size - 1
