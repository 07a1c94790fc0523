"""A new strategy is one file: this test file defines a toy policy and, without touching any other module (no
registry entry, no replay rule), decodes with it losslessly and replays it exactly as it ran live."""
from dataclasses import dataclass

import numpy as np
import torch
from helpers import tiny_llama

from spectree.core.decode import speculative_generate
from spectree.core.policy import Policy, Rows
from spectree.prompts import Prompt
from spectree.replay.logbook import LogConfig, log_prompt
from spectree.replay.replay import replay


@dataclass
class NearBest(Policy):
    """Keep the children whose p is at least half the best sibling's, at most `budget` per tree (likeliest paths
    first); stop expanding a path after `run` rank-0 steps in a row (per-node memory in the state "run")."""

    K: int = 3
    d_max: int = 4
    budget: int = 6
    run: int = 2

    name = "near_best"
    features = frozenset({"draft_prob", "rank"})

    def select(self, cand: Rows, tree: Rows) -> np.ndarray:
        near = cand.draft_prob >= 0.5 * cand.confidence  # [c] the parent's best p is its distribution's max
        room = self.budget - (tree.count() - 1)  # [trees] draft nodes left
        cand.set_state("run", np.where(cand.rank == 0, cand.parent_state("run") + 1, 0))
        return near & cand.top(np.where(near, cand.joint, -1.0), room[cand.tree])

    def expand(self, new: Rows, tree: Rows) -> np.ndarray:
        return new.state("run") < self.run


class FixedPrompt:
    def __init__(self, ids):
        self.ids = ids

    def apply_chat_template(self, messages, add_generation_prompt=True):
        return self.ids


def test_a_strategy_defined_in_one_file_is_lossless_live_and_replays_exactly(tiny_target):
    draft, policy = tiny_llama(seed=1, layers=1), NearBest()
    cfg = LogConfig(max_new_tokens=20, K=3, d_max=4, beam=400)  # every node below depth 4 expanded
    for ids in ([3, 14, 15, 92, 65], [2, 71, 82, 81]):
        live = speculative_generate(tiny_target, draft, ids, policy, 20)
        with torch.inference_mode():
            ref = tiny_target.generate(torch.tensor([ids]), max_new_tokens=20, do_sample=False, eos_token_id=None,
                                       pad_token_id=0)[0, len(ids):].tolist()
        assert live.tokens == ref
        logged = log_prompt(tiny_target, draft, FixedPrompt(ids), Prompt("toy", "0", "toy", "x"), cfg, eos_ids=())
        steps = replay([logged], policy)
        assert steps.tau.tolist() == [s.tau for s in live.steps]
        assert steps.gamma.tolist() == [s.gamma for s in live.steps]
        assert max(s.gamma for s in live.steps) <= policy.budget and any(s.gamma > 1 for s in live.steps)
