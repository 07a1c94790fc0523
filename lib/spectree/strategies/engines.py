"""The draft trees serving engines build, each written once as a policy (live drafting and replay alike), so that a
tree found here can be deployed with the engine's own knobs (`spectree.deploy` turns a setting into config text).

Read from the engines' sources (described, not copied; the workbook's notes on each are in docs/deploy.md):

- **SGLang** EAGLE-2 (`--speculative-num-steps S --speculative-eagle-topk K --speculative-num-draft-tokens N`),
  sgl-project/sglang `python/sglang/srt/speculative/spec_utils.py` (`select_top_k_tokens`, commit 00731f0b) and
  `eagle_utils.py` (`organize_draft_results`, commit 003ddbce): the root's K children are all drafted and expanded;
  at each later step every expanded node offers its top K children, all K² are drafted and the K of largest joint
  probability are expanded; after S levels the N − 1 drafted nodes of largest joint probability are verified (N
  counts the root). topk = 1 makes it a chain of S (N = S + 1).
- **TensorRT-LLM** dynamic tree (`EagleDecodingConfig(use_dynamic_tree=True, max_draft_len=L,
  dynamic_tree_max_topK=K, max_total_draft_tokens=M)`), NVIDIA/TensorRT-LLM
  `tensorrt_llm/_torch/speculative/eagle3_dynamic_tree.py` (commit 470bb720) and `llmapi/llm_args.py` (commit
  00439672): the same rule, its budget M excluding the root and validated to L ≤ M ≤ K·L. `non_leaves` is the legacy
  TensorRT engine's `max_non_leaves_per_layer` (cpp/.../eagleDecodingKernels.h, commit 89fd9b74), which caps the
  nodes expanded per layer; the PyTorch path expands K.
- **Static choices** (TensorRT-LLM `eagle_choices`, vLLM `speculative_token_tree`, Medusa `medusa_choices`): a fixed
  tree given as the paths of its nodes, each a list of child ranks from the root (`[0, 1]`: the second child of the
  root's first). Conditioned on the path, as in EAGLE; Medusa's heads instead give a depth's rank the same token
  whatever the parent (docs/deploy.md).

They build EAGLE-2's tree (`strategies.eagle2.EagleTree`, the rule written once): rerank every drafted candidate,
K² per level; they differ from the paper only in how they name its numbers.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np

from spectree.core.errors import SpectreeError
from spectree.core.policy import Policy
from spectree.strategies.eagle2 import EagleTree
from spectree.strategies.static import StaticShape

DRAFT = "<your EAGLE draft>"  # the draft model's path in config text, until the user names theirs


@dataclass
class SGLang(EagleTree):
    """SGLang's EAGLE-2 tree: steps = --speculative-num-steps (depth), topk = --speculative-eagle-topk (children per
    expanded node, nodes expanded per level), tokens = --speculative-num-draft-tokens (verified, root included).
    Defaults: SGLang's own for a Llama target (5, 4, 8)."""

    steps: int = 5
    topk: int = 4
    tokens: int = 8

    name = "sglang"
    param_names: ClassVar[dict[str, str]] = {"K": "topk", "d_max": "steps"}
    size_params = ("topk", "steps")

    def __post_init__(self):
        super().__post_init__()
        if self.steps < 1 or self.tokens < 2:
            raise SpectreeError(f"sglang: steps must be >= 1 and tokens (root included) >= 2, got {self.spec}")
        if self.topk == 1 and self.tokens != self.steps + 1:
            raise SpectreeError(f"sglang: with topk=1 SGLang sets tokens = steps + 1 = {self.steps + 1} (a chain), "
                                f"got tokens={self.tokens}")
        if self.tokens - 1 > self.candidates():
            raise SpectreeError(f"sglang: tokens - 1 = {self.tokens - 1} exceeds the {self.candidates()} candidates "
                                f"of steps={self.steps}, topk={self.topk} (topk + (steps - 1)·topk²)")

    @property
    def K(self) -> int:
        return self.topk

    @property
    def d_max(self) -> int:
        return self.steps

    def expanded(self) -> int:
        return self.topk

    def kept(self) -> int:
        return self.tokens - 1

    def engine_config(self, engine: str, draft: str = DRAFT, token_map: str = "") -> str:
        """SGLang server flags (`python -m sglang.launch_server --model ... FLAGS`)."""
        expect(self, engine, "sglang")
        flags = [f"--speculative-algorithm EAGLE --speculative-draft-model-path {draft}",
                 f"--speculative-num-steps {self.steps} --speculative-eagle-topk {self.topk} "
                 f"--speculative-num-draft-tokens {self.tokens}"]
        return " \\\n".join(flags + ([f"--speculative-token-map {token_map}"] if token_map else []))


@dataclass
class TRTLLM(EagleTree):
    """TensorRT-LLM's dynamic tree: layers = max_draft_len (depth), topk = dynamic_tree_max_topK, tokens =
    max_total_draft_tokens (root excluded; L ≤ tokens ≤ topk·L), non_leaves = max_non_leaves_per_layer (0: topk,
    the PyTorch path). Defaults: its documented example (6, 10, 60)."""

    layers: int = 6
    topk: int = 10
    tokens: int = 60
    non_leaves: int = 0

    name = "trtllm"
    param_names: ClassVar[dict[str, str]] = {"K": "topk", "d_max": "layers"}
    size_params = ("topk", "layers")

    def __post_init__(self):
        super().__post_init__()
        if self.layers < 1 or self.non_leaves < 0:
            raise SpectreeError(f"trtllm: layers must be >= 1 and non_leaves >= 0, got {self.spec}")
        if not self.layers <= self.tokens <= self.topk * self.layers:
            raise SpectreeError(f"trtllm: TensorRT-LLM requires max_draft_len <= max_total_draft_tokens <= "
                                f"dynamic_tree_max_topK·max_draft_len ({self.layers} <= tokens <= "
                                f"{self.topk * self.layers}), got tokens={self.tokens}")

    @property
    def K(self) -> int:
        return self.topk

    @property
    def d_max(self) -> int:
        return self.layers

    def expanded(self) -> int:
        return min(self.topk, self.non_leaves or self.topk)

    def kept(self) -> int:
        return self.tokens

    def engine_config(self, engine: str, draft: str = DRAFT, token_map: str = "") -> str:
        """TensorRT-LLM's `speculative_config` as YAML (trtllm-serve --config / LLM(speculative_config=...)): the
        dynamic tree, or the linear drafter at topk = 1 (which TensorRT-LLM runs for a top-1 tree)."""
        expect(self, engine, "trtllm")
        lines = ["speculative_config:", "  decoding_type: Eagle3", f"  max_draft_len: {self.layers}",
                 f"  speculative_model: {draft}"]
        if self.topk > 1:
            lines += ["  use_dynamic_tree: true", f"  dynamic_tree_max_topK: {self.topk}",
                      f"  max_total_draft_tokens: {self.tokens}"]
        if self.non_leaves:
            lines.append(f"  max_non_leaves_per_layer: {self.non_leaves}  # the legacy TensorRT engine's cap")
        return "\n".join(lines)


def parse_paths(text: str) -> frozenset:
    """Paths in the spec's form `0/1/0.0/0.1` (nodes by '/', ranks by '.') → frozenset of rank tuples."""
    try:
        paths = [tuple(int(r) for r in p.split(".")) for p in text.split("/") if p]
    except ValueError:
        raise SpectreeError(f"choices: paths must look like 0/1/0.0/0.1 (nodes by '/', child ranks by '.'), "
                            f"got '{text}'") from None
    return check_paths(paths)


def check_paths(paths) -> frozenset:
    """A set of paths that is a tree: non-empty paths of non-negative ranks, every prefix present, no repeats."""
    shape = frozenset(tuple(int(r) for r in p) for p in paths)
    if not shape or any(not p or min(p) < 0 for p in shape) or len(shape) != len(list(paths)):
        raise SpectreeError("choices: give at least one path, each a non-empty list of ranks >= 0, none twice")
    orphan = next((p for p in sorted(shape, key=len) if len(p) > 1 and p[:-1] not in shape), None)
    if orphan is not None:
        raise SpectreeError(f"choices: path {list(orphan)} has no parent path {list(orphan[:-1])} (every prefix of a "
                            f"path must be a path, as the engines require)")
    return shape


def format_paths(shape) -> str:
    """The spec form of a set of paths, breadth first (length, then ranks), as the engines sort them."""
    return "/".join(".".join(map(str, p)) for p in sorted(shape, key=lambda q: (len(q), q)))


@dataclass
class Choices(StaticShape):
    """A static tree in the engines' choices format: paths = `0/1/0.0/0.1` (TensorRT-LLM eagle_choices [[0], [1],
    [0, 0], [0, 1]]), or file = a JSON list of paths (an eagle_choices / medusa_choices list, or vLLM's token tree
    as a list of lists). Offered children are taken by rank: [0, 2] means the root's best child's third best."""

    paths: str = ""
    file: str = ""

    name = "choices"
    size_params = ("paths",)

    def __post_init__(self):
        if bool(self.paths) == bool(self.file):
            raise SpectreeError("choices: give paths=0/1/0.0 or file=PATH.json (one of them)")
        if self.file:
            try:
                listed = json.loads(Path(self.file).read_text())
            except (OSError, ValueError) as err:
                raise SpectreeError(f"choices: cannot read {self.file} as a JSON list of paths ({err})") from None
            if not isinstance(listed, list) or not all(isinstance(p, list) for p in listed):
                raise SpectreeError(f"choices: {self.file} must hold a JSON list of paths, e.g. [[0], [1], [0, 0]]")
            self.shape = check_paths(listed)
        else:
            self.shape = parse_paths(self.paths)
        super().__post_init__()

    def listed(self) -> list[list[int]]:
        """The paths as the engines list them: breadth first, each a list of child ranks."""
        return [list(p) for p in sorted(self.shape, key=lambda q: (len(q), q))]

    def engine_config(self, engine: str, draft: str = DRAFT, token_map: str = "") -> str:
        """TensorRT-LLM: `speculative_config` YAML with `eagle_choices`; vLLM: the `--speculative-config` JSON, with
        `speculative_token_tree` unless the tree is a chain (vLLM's tree drafting takes only trees whose every node
        at a depth has the same number of children, and ran with the TREE_ATTN backend of v0.10 to v0.21)."""
        expect(self, engine, "trtllm", "vllm")
        paths = self.listed()
        if engine == "trtllm":
            return "\n".join(["speculative_config:", "  decoding_type: Eagle3", f"  max_draft_len: {self.d_max}",
                              f"  speculative_model: {draft}", f"  eagle_choices: {json.dumps(paths)}"])
        config = {"method": "eagle", "model": draft, "num_speculative_tokens": len(paths)}
        if any(p[-1] > 0 for p in paths):
            if not uniform(self.shape):
                raise SpectreeError(f"{self.spec}: vLLM drafts only trees whose nodes at a depth all have the same "
                                    f"number of children (per-level branching); this one is not")
            config["speculative_token_tree"] = str([tuple(p) for p in paths])
        return json.dumps(config)


def uniform(shape) -> bool:
    """Whether every node at a depth has the same children ranks 0..c−1 (a tree of per-level branching factors)."""
    by_parent: dict[tuple, int] = {}
    for p in shape:
        by_parent[p[:-1]] = by_parent.get(p[:-1], 0) + 1
    for depth in {len(p) for p in shape}:
        parents = [p for p in [()] + sorted(shape) if len(p) == depth - 1]
        counts = {by_parent.get(p, 0) for p in parents}
        if len(counts) != 1:
            return False
    return all((*p[:-1], r) in shape for p in shape for r in range(p[-1]))


def uniform_trees(widths=(1, 2, 3, 4), max_depth: int = 6, max_nodes: int = 64) -> list[tuple[int, ...]]:
    """Per-level branching factors (non-increasing, as useful trees are) whose trees hold at most max_nodes."""
    out, frontier = [], [()]
    while frontier:
        nxt = []
        for ws in frontier:
            for w in widths:
                if ws and w > ws[-1]:
                    continue
                grown = ws + (w,)
                if len(grown) <= max_depth and sum(np.cumprod(grown)) <= max_nodes:
                    out.append(grown)
                    nxt.append(grown)
        frontier = nxt
    return out


def choices_of(widths: tuple[int, ...]) -> Choices:
    """The static tree of per-level branching factors: every node at depth d has children 0..widths[d]−1."""
    paths, level = [], [()]
    for w in widths:
        level = [p + (r,) for p in level for r in range(w)]
        paths += level
    return Choices(paths=format_paths(paths))


def expect(policy: Policy, engine: str, *engines: str) -> None:
    if engine not in engines:
        raise SpectreeError(f"{policy.spec} is not a setting {engine} can take (it fits {', '.join(engines)})")


__all__ = ["SGLang", "TRTLLM", "Choices", "parse_paths", "check_paths", "format_paths", "uniform",
           "uniform_trees", "choices_of", "DRAFT"]
