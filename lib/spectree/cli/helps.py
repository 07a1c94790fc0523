"""Help texts of the flags the command line makes from dataclass fields (`train` from `training.training.TrainConfig`,
`log` from `replay.logbook.LogConfig`): one entry per field, kept beside the parser (tests/cli/test_help.py fails
on a field without one, or an entry without a field)."""
from __future__ import annotations

TRAIN_HELP = {
    "kind": "edd: a soft prompt of the target's hidden states (EDD); vdm: tokens only",
    "loss": "kl: KL(P_target || P_draft); ce: cross-entropy on the text (an ablation)",
    "hidden_layer": "the target's hidden_states index fed to EDD (-1: the 4th-to-last layer)",
    "hidden_norm": "pass the soft prompt's hidden states through the target's final norm",
    "fuse": "EDD: also add a projection of norm(h_{s-1}) to every draft token's embedding",
    "block_min": "shortest dual block: each step draws its length from [--block-min, --block-max]",
    "block_max": "longest dual block",
    "root_weight": "loss weight of each block's first token (draft position 1, where h_{s-1} is freshest)",
    "seq_len": "tokens per training window",
    "batch": "windows per step",
    "lr": "peak learning rate",
    "warmup": "steps of linear learning-rate warmup",
    "decay": "the last this many steps lower the learning rate linearly to 0 (warmup-stable-decay; 0: constant)",
    "steps": "optimizer steps",
    "seed": "seed of the data order and the initialisation",
    "data": "sharegpt: ShareGPT conversations; self: the target's greedy answers to ShareGPT prompts",
    "self_prompts": "--data self: ShareGPT prompts answered (cycled over epochs if the steps need more windows)",
    "self_code_prompts": "--data self: also answer this many standard-library functions to complete (HumanEval's "
                         "format)",
    "self_max_new": "--data self: answer length cap in tokens",
    "self_batch": "--data self: generation batch (batched greedy output depends on it: part of the recipe)",
    "teacher_topk": "0: the teacher's full logits every step; k > 0: KL on the teacher's top k, cached per window",
}

LOG_HELP = {
    "pair": "named target/draft pair (--pair)",
    "max_new_tokens": "greedy positions logged per prompt (--max-new-tokens)",
    "K": "children stored per expanded node",
    "d_max": "depth of the logged trees",
    "beam": "nodes expanded per layer, by joint probability",
    "b_env": "also expand every node whose path ranks are all < this, at depth < --d-env",
    "d_env": "depth of that envelope",
    "c2t": "a C2T classifier (--c2t)",
    "c2t_beta": "C2T's β (--c2t-beta)",
    "shape": "what is expanded (--shape)",
    "dyspec_budgets": "--shape dyspec: the budgets m whose DySpec trees are logged, comma-separated (e.g. 8,64; each "
                      "<= --K)",
    "dyspec_cap": "--shape dyspec: the capped DySpec's children per node",
    "dyspec_sequoia": "--shape dyspec: a positional acceptance vector p, '/'-separated (e.g. 0.6/0.15/0.07): "
                      "Sequoia's trees of the budgets are logged too",
}
