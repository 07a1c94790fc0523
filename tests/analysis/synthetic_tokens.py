"""Synthetic token tables for the analysis tests: the columns of `token_tables.logbook_tokens`, prompts of
known size, exact per-prompt rates."""
import numpy as np
import pandas as pd


def tokens(**columns) -> pd.DataFrame:
    """A token table with defaults for the columns a test does not care about."""
    n = len(next(iter(columns.values())))
    base = {"prompt": 0, "dataset": "mtbench", "position": np.arange(n), "depth": 1, "rank": 0, "token": 0,
            "p": 0.5, "joint": 0.5, "entropy": 0.5, "entropy_topm": 0.5, "confidence": 0.5, "accept": 0.0,
            "target_prob": 0.1, "examined": True, "chain": True}
    return pd.DataFrame({**base, **columns})


def verdicts(claims):
    return [c["verdict"] for c in claims]


def of_prompts(prompt, **columns) -> pd.DataFrame:
    """A token table, one row per prompt label in `prompt`."""
    return tokens(prompt=prompt, **columns)


def prompts(n_prompts, size):
    """Labels of n_prompts prompts of `size` tokens each."""
    return np.repeat(np.arange(n_prompts), size)


def per_prompt(values, size):
    return np.repeat(np.asarray(values, dtype=float), size)


def share(rates, size):
    """0/1 per token: the first round(rate · size) tokens of each prompt are 1 (exact per-prompt rates)."""
    return (np.tile(np.arange(size), len(rates)) < per_prompt(rates, size) * size).astype(float)


def each_token_a_prompt(t):
    """The same tokens as if every token were its own prompt: what a token-level bootstrap resampled."""
    return t.assign(prompt=np.arange(len(t)))
