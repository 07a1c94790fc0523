"""Compare prompt-lookup (and suffix) rules on a prompt set at the cost of one plain generation per prompt.

Greedy speculative decoding commits the target's greedy tokens whatever is proposed, so each rule's τ and γ follow
from one greedy continuation per prompt (`spectree.retrieval.walk`, pinned to live decoding by a test). Each rule's
steps are priced on the pair's cost model of this machine (`speed.costmodel`: a target forward over the step's
tokens), as × plain decoding's time per token: what the rule would save on these kernels, before the rest of a
step. HF's prompt lookup is `HF_RULE` (pinned to HF's candidate generator by a test). τ and γ are exact; the price
is a model, the timed answer is `python -m spectree bench`.

    .venv/bin/python scripts/lookup_rules.py --prompts sharegpt:40@200 --max-new-tokens 64
    .venv/bin/python scripts/lookup_rules.py --prompts jsonl:my.jsonl --rules lookup lookup:len1=10 suffix:k=2
"""
from __future__ import annotations

import argparse

import pandas as pd
import torch
from tqdm import tqdm

from spectree.core.decode import speculative_generate
from spectree.models.pairs import load_target, pair_parts
from spectree.prompts import chat_ids, parse_prompt_spec
from spectree.retrieval.proposers import HF_RULE, TAU_RULE
from spectree.retrieval.walk import walk
from spectree.speed.costmodel import cached_cost_model
from spectree.strategies import parse_strategy

RULES = ["lookup", HF_RULE, TAU_RULE, "lookup:len=6", "lookup:len=8", "lookup:len=12", "lookup:n=2", "lookup:n=4",
         "lookup:occurrence=first", "lookup:occurrence=both", "lookup:min_n=1", "lookup:min_n=1,len1=2",
         "lookup:min_n=1,occurrence=both,len1=2", "lookup:min_n=1,occurrence=both,len1=6", "lookup:min_n=1,occurrence=both,len1=10"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", required=True, help="prompt spec, e.g. sharegpt:40@200 or jsonl:PATH")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--pair", default="smollm2-135m-instruct+edd:smollm2-edd@8192",
                    help="its target generates; its cost model (cached by `bench`) prices the steps")
    ap.add_argument("--rules", nargs="+", default=RULES, help="retrieval specs (the part after `ar+`)")
    args = ap.parse_args()
    policies = {rule: parse_strategy(f"ar+{rule}") for rule in args.rules}  # bad specs fail before any model loads
    prompts = parse_prompt_spec(args.prompts)
    cost, origin = cached_cost_model(args.pair, kernels=("auto", "stock"))  # as `bench` caches it
    target, tok = load_target(pair_parts(args.pair)[0])
    stop, rows = (tok.eos_token_id,), []
    for prompt in tqdm(prompts, desc="greedy continuations", unit="prompt"):
        ids = chat_ids(tok, prompt.text)
        tokens = speculative_generate(target, None, ids, None, args.max_new_tokens, eos_ids=stop).tokens
        for rule, policy in policies.items():
            w = walk(policy.retrieval, ids, tokens, args.max_new_tokens, stop)
            rows.append({"rule": rule, "prompt": prompt.key, "tokens": w.tokens, "forwards": w.forwards,
                         "candidates": w.candidates, "priced_s": sum(cost.t_target(n) for n in w.sizes)})
    df = pd.DataFrame(rows).groupby("rule", sort=False)[["tokens", "forwards", "candidates", "priced_s"]].sum()
    table = pd.DataFrame({"tau": df.tokens / df.forwards, "gamma": df.candidates / df.forwards})
    table["tau_vs_hf"] = table.tau / table.tau[HF_RULE]
    table["priced_x_plain"] = (df.priced_s / df.tokens) / cost.t_target(1)  # < 1: faster than plain decoding
    table["priced_vs_hf"] = table.priced_x_plain / table.priced_x_plain[HF_RULE]
    print(f"{args.prompts} ({len(prompts)} prompts), {args.max_new_tokens} new tokens, target of {args.pair}; "
          f"priced on its cost model ({origin})")
    print(table.round(3).to_string())


if __name__ == "__main__":
    torch.set_grad_enabled(False)
    main()
