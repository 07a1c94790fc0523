"""The draft trees serving engines build, each written once as a policy (live drafting and replay alike), so that a
tree found here can be deployed with the engine's own knobs (`spectree.deploy` turns a setting into config text).

Read from the engines' sources (described, not copied; the workbook's notes on each are in docs/deploy.md):

- **SGLang** EAGLE-2 (`--speculative-num-steps S --speculative-eagle-topk K --speculative-num-draft-tokens N`),
  sgl-project/sglang `python/sglang/srt/speculative/spec_utils.py` (`select_top_k_tokens`, commit 00731f0b) and
  `eagle_utils.py` (`organize_draft_results`, commit 003ddbce): the root's K children are all drafted and expanded;
  at each later step every expanded node offers its top K children, all K² are drafted and the K of largest joint
  probability are expanded; after S levels the N − 1 drafted nodes of largest joint probability are verified (N
  counts the root). topk = 1 makes it a chain of S (N = S + 1).
- **TensorRT-LLM** dynamic tree (`Eagle3DecodingConfig(use_dynamic_tree=True, max_draft_len=L,
  dynamic_tree_max_topK=K, max_total_draft_tokens=M)`), NVIDIA/TensorRT-LLM
  `tensorrt_llm/_torch/speculative/eagle3_dynamic_tree.py` (commit 470bb720) and `llmapi/llm_args.py` (commit
  fcd3f316): the same rule, its budget M excluding the root and validated to L ≤ M ≤ K·L. The config also accepts
  `max_non_leaves_per_layer`, which the dynamic-tree worker never reads (it expands K per layer), so no setting here
  writes it.
- **Static choices** (TensorRT-LLM `eagle_choices`): a fixed tree given as the paths of its nodes, each a list of child
  ranks from the root (`[0, 1]`: the second child of the root's first). A node with c listed children drafts its
  top c, so a tree whose ranks skip one (`[[0], [2]]`) is drafted as another (`[[0], [1]]`) and is refused.
- **vLLM** (`--speculative-config '{"method": "eagle", "num_speculative_tokens": n}'`): a chain of n. No tree-aware
  verification was merged and tree attention was removed (vllm-project/vllm PR #42121, merged 2026-05-08); earlier
  versions drafted a chain unless the TREE_ATTN backend was selected. A branching tree is refused for vLLM.

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
# --draft-kind: an EAGLE-1/2 head or an EAGLE-3 head; each engine names the two in its own words
ALGORITHMS = {"sglang": {"eagle": "EAGLE", "eagle3": "EAGLE3"},  # --speculative-algorithm
              "trtllm": {"eagle": "Eagle", "eagle3": "Eagle3"},  # speculative_config.decoding_type
              "vllm": {"eagle": "eagle", "eagle3": "eagle3"}}  # --speculative-config's "method"
DRAFT_KINDS = ("eagle", "eagle3")


def algorithm(engine: str, draft_kind: str) -> str:
    """The engine's name for a draft of this kind (`ALGORITHMS`), or one clear error."""
    if draft_kind not in DRAFT_KINDS:
        raise SpectreeError(f"draft kind '{draft_kind}': use eagle (an EAGLE-1/2 head) or eagle3 (an EAGLE-3 head)")
    return ALGORITHMS[engine][draft_kind]


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

    def verified(self) -> int:
        return self.tokens

    def engine_config(self, engine: str, draft: str = DRAFT, token_map: str = "", draft_kind: str = "eagle") -> str:
        """SGLang server flags (`python -m sglang.launch_server --model ... FLAGS`)."""
        expect(self, engine, "sglang")
        flags = [f"--speculative-algorithm {algorithm(engine, draft_kind)} --speculative-draft-model-path {draft}",
                 f"--speculative-num-steps {self.steps} --speculative-eagle-topk {self.topk} "
                 f"--speculative-num-draft-tokens {self.tokens}"]
        return " \\\n".join(flags + ([f"--speculative-token-map {token_map}"] if token_map else []))


@dataclass
class TRTLLM(EagleTree):
    """TensorRT-LLM's dynamic tree: layers = max_draft_len (depth), topk = dynamic_tree_max_topK (children per
    expanded node, nodes expanded per layer), tokens = max_total_draft_tokens (root excluded; L ≤ tokens ≤ topk·L).
    Defaults: its documented example (6, 10, 60)."""

    layers: int = 6
    topk: int = 10
    tokens: int = 60

    name = "trtllm"
    param_names: ClassVar[dict[str, str]] = {"K": "topk", "d_max": "layers"}
    size_params = ("topk", "layers")

    def __post_init__(self):
        super().__post_init__()
        if self.layers < 1:
            raise SpectreeError(f"trtllm: layers must be >= 1, got {self.spec}")
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
        return self.topk

    def verified(self) -> int:
        return self.tokens + 1  # its draft tokens and the root

    def engine_config(self, engine: str, draft: str = DRAFT, token_map: str = "", draft_kind: str = "eagle") -> str:
        """TensorRT-LLM's `speculative_config` as YAML (trtllm-serve --config / LLM(speculative_config=...)): the
        dynamic tree, or the linear drafter at topk = 1 (which TensorRT-LLM runs for a top-1 tree)."""
        expect(self, engine, "trtllm")
        lines = trtllm_header(self.layers, draft, draft_kind)
        if self.topk > 1:
            lines += ["  use_dynamic_tree: true", f"  dynamic_tree_max_topK: {self.topk}",
                      f"  max_total_draft_tokens: {self.tokens}"]
        return "\n".join(lines)


def trtllm_header(layers: int, draft: str, draft_kind: str) -> list[str]:
    return ["speculative_config:", f"  decoding_type: {algorithm('trtllm', draft_kind)}",
            f"  max_draft_len: {layers}", f"  speculative_model: {draft}"]


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

    def engine_config(self, engine: str, draft: str = DRAFT, token_map: str = "", draft_kind: str = "eagle") -> str:
        """TensorRT-LLM: `speculative_config` YAML with `eagle_choices` (refused where a node's listed ranks skip
        one: the engine would draft its top c instead); vLLM: the `--speculative-config` JSON of a chain (a branching
        tree is refused: vLLM verifies chains only)."""
        expect(self, engine, "trtllm", "vllm")
        paths = self.listed()
        if engine == "trtllm":
            drafted = reranked(self.shape)
            if drafted != self.shape:
                raise SpectreeError(f"{self.spec}: TensorRT-LLM drafts a node's top c tokens for its c listed "
                                    f"children, so this tree would be drafted as choices:paths="
                                    f"{format_paths(drafted)}; give that tree (ranks without gaps)")
            return "\n".join(trtllm_header(self.d_max, draft, draft_kind) + [f"  eagle_choices: {json.dumps(paths)}"])
        if any(p[-1] > 0 for p in paths):
            raise SpectreeError(f"{self.spec}: vLLM drafts a chain of num_speculative_tokens tokens (no tree-aware "
                                f"verification was merged, and tree attention was removed in vLLM PR #42121); use a "
                                f"chain (choices:paths=0/0.0/...) here, or SGLang / TensorRT-LLM for a tree")
        return json.dumps({"method": algorithm(engine, draft_kind), "model": draft, "num_speculative_tokens": len(paths)})


def reranked(shape) -> frozenset:
    """The tree an engine drafts for listed paths: each node's listed children become its top-c, in rank order
    (`{(0,), (2,), (2, 1)}` → `{(0,), (1,), (1, 0)}`)."""
    out, todo = set(), [((), ())]  # (listed path, drafted path) of a kept node
    while todo:
        listed, drafted = todo.pop()
        kids = sorted(p[-1] for p in shape if len(p) == len(listed) + 1 and p[:-1] == listed)
        for rank, r in enumerate(kids):
            out.add(drafted + (rank,))
            todo.append((listed + (r,), drafted + (rank,)))
    return frozenset(out)


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


__all__ = ["SGLang", "TRTLLM", "Choices", "parse_paths", "check_paths", "format_paths", "reranked",
           "uniform_trees", "choices_of", "algorithm", "ALGORITHMS", "DRAFT_KINDS", "DRAFT"]
