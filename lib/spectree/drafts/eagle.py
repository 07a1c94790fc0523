"""EAGLE-1/2 draft heads (`eagle:FOLDER`): a feature-level draft over the target's last hidden states.

The head follows EAGLE's published model code (SafeAILab/EAGLE, `eagle/model/cnets1.py` `Model` and
`ea_model.py`; EAGLE-2 reuses the EAGLE-1 head and changes only the tree):

  x_j   = fc(cat(embed(t_{j+1}), f_j))          fc: Linear(2H → H, bias), embedding FIRST, then the feature
  o_j   = decoder layers over x (layer 0 without its input RMSNorm; no final norm)
  logits = target.lm_head(o_j)                   the prediction for t_{j+2}

where, for committed tokens, f_j is the TARGET's last hidden state at position j after its final norm (what
EAGLE's `EaModel.forward` returns as `outputs[0]`), so token t_{j+1} is paired with the state of the token
before it (EAGLE feeds `input_ids[:, 1:]`) and sits at head position j. A draft node deeper in the tree is
paired with its parent's head output o (EAGLE's `input_hidden = out_hidden[:, out_ids]`). After a step, the
accepted tokens and the bonus are fed again with the target's states (EAGLE's `stable_kv` + accepted
hidden states), so tree entries never stay in the head's cache.

The head is an HF `LlamaForCausalLM` with the target's vocabulary: its `embed_tokens` is a
`FeatureEmbedding` (the fc projection, with features set per forward), `norm` is the identity, `lm_head` is
the target's own module (shared, not copied), and the token embedding is the target's unless the checkpoint
carries a different one. EAGLE-3 heads (fc over three target layers, a 2H-wide attention input, their own
norm, head and d2t vocabulary map) do not fit this layer and are refused with a clear message.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedModel
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

from spectree.core.drafting import CachedLM, draft_tree
from spectree.core.errors import SpectreeError
from spectree.core.policy import Policy
from spectree.core.sampling import Sampling
from spectree.core.tree import DraftTree

CONFIG_DROP = ("architectures", "torch_dtype", "transformers_version", "auto_map")


class FeatureEmbedding(torch.nn.Module):
    """EAGLE's input projection in the place of the head's token embedding: ids [1, m] → fc(cat(embed(ids),
    features)) [1, m, H], with `features` [1, m, H] set before each forward (and cleared after it). A bare
    forward with no features set (the cost model's timing forwards) reads zero features: same cost."""

    def __init__(self, embed: torch.nn.Module, fc: torch.nn.Linear):
        super().__init__()
        self.embed, self.fc = embed, fc
        self.features: Optional[torch.Tensor] = None

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)  # [1, m, H]
        f = torch.zeros_like(x) if self.features is None else self.features
        if f.shape != x.shape:
            raise SpectreeError(f"an EAGLE head needs one feature per token: got features {tuple(f.shape)} for "
                                f"tokens {tuple(ids.shape)}")
        return self.fc(torch.cat([x.to(f.dtype), f], dim=-1))


class EagleLM(CachedLM):
    """A `CachedLM` over an EAGLE head: committed entries are fed with the target's features
    (`feed_committed`), tree nodes with their parent's head output (`feed_nodes`, kept per node of one tree;
    the root's from the last committed entry)."""

    def __init__(self, model: PreTrainedModel):
        self.embed: FeatureEmbedding = model.model.embed_tokens
        super().__init__(model)

    def reset(self) -> None:
        super().reset()
        self.root_feature: Optional[torch.Tensor] = None  # [H] head output at the root's entry
        self.feats: Optional[torch.Tensor] = None  # [n, H] head output of every tree node fed (row 0: the root)
        self.shift = 1  # target position − head position (EAGLE's t_{j+1} sits at j; 0 after a one-token prompt)

    def _with(self, features: torch.Tensor, run):
        self.embed.features = features[None].to(self.model.device, self.model.dtype)  # [1, m, H]
        try:
            return run()
        finally:
            self.embed.features = None

    def feed_committed(self, tokens: list[int], features: torch.Tensor) -> torch.Tensor:
        """Commit tokens [k] paired with features [k, H] (the target's state of each token's predecessor);
        returns the head's logits [V] at the last one (the root)."""
        if len(tokens) != len(features):
            raise SpectreeError(f"an EAGLE head pairs each token with one target state: got {len(tokens)} "
                                f"tokens and {len(features)} states")
        ids = torch.tensor(tokens, device=self.model.device)
        out = self._with(features, lambda: self.feed_chain(ids, output_hidden_states=True, last_only=True))
        self.root_feature = out.hidden_states[-1][0, -1]  # [H]
        self.feats = None
        return out.logits[0, -1]

    def feed_nodes(self, parents: np.ndarray, nodes: np.ndarray, tokens: torch.Tensor, positions: torch.Tensor,
                   output_hidden_states: bool = False):
        """Feed tree nodes [m] (parents: [n]), each paired with its parent's head output; their outputs are
        kept for their children. positions: [m] target positions (the head's are `shift` lower)."""
        n = len(parents)
        if self.feats is None:
            self.feats = self.root_feature.new_zeros(n, self.root_feature.shape[-1])
            self.feats[0] = self.root_feature
        elif len(self.feats) < n:
            self.feats = torch.cat([self.feats, self.feats.new_zeros(n - len(self.feats), self.feats.shape[-1])])
        features = self.feats[torch.from_numpy(parents[nodes]).to(self.feats.device)]  # [m, H]
        out = self._with(features, lambda: super(EagleLM, self).feed_nodes(parents, nodes, tokens,
                                                                           positions - self.shift, True))
        self.feats[torch.from_numpy(np.asarray(nodes)).to(self.feats.device)] = out.hidden_states[-1][0]
        return out

    def rollback(self) -> None:
        super().rollback()
        self.feats = None

    def keep_path(self, path: torch.Tensor) -> None:
        super().keep_path(path)
        self.feats = None


class EagleDrafter:
    """Drafting with an EAGLE-1/2 head. The head's cache holds the committed tokens t_1 … t_s (t_s the root),
    each paired with the target's final-norm state of the token before it."""

    needs_hidden = True

    def __init__(self, head: PreTrainedModel, hidden_layer: int):
        self.lm, self.hidden_layer = EagleLM(head), hidden_layer

    def start(self, prompt_ids: list[int], hidden: Optional[torch.Tensor]) -> torch.Tensor:
        """hidden: [L-1, H] target states of the prompt without its last token (the root), None for a
        one-token prompt: its root, with no state before it, is fed with a zero feature (EAGLE itself always
        has the prompt encoded first). Returns the head's logits [V] at the root."""
        self.lm.reset()
        if hidden is None or len(hidden) == 0:
            self.lm.shift = 0
            return self.lm.feed_committed(prompt_ids[-1:], torch.zeros(1, self.lm.model.config.hidden_size))
        return self.lm.feed_committed(prompt_ids[1:], hidden)

    def advance(self, new_tokens: list[int], hidden: torch.Tensor) -> torch.Tensor:
        """new_tokens: the k accepted tokens and the bonus; hidden: [k+1, H] target states of the old root and
        the k accepted tokens — each new token is paired with its predecessor's state."""
        return self.lm.feed_committed(new_tokens, hidden)

    def draft(self, root_token: int, root_logits: torch.Tensor, prefix_len: int, policy: Policy,
              sampling: Sampling, generator: Optional[torch.Generator] = None) -> DraftTree:
        return draft_tree(self.lm, root_token, root_logits, prefix_len, policy, sampling, generator)


def read_eagle_folder(path: Path) -> tuple[dict, dict[str, torch.Tensor]]:
    """(config.json as a dict, the checkpoint's tensors) of an EAGLE head folder: model.safetensors or
    pytorch_model.bin (loaded with weights_only), as EAGLE's `EaModel.from_pretrained` reads them."""
    path = Path(path)
    if not (path / "config.json").is_file():
        raise SpectreeError(f"{path} is not an EAGLE head folder: it has no config.json (expected config.json + "
                            f"model.safetensors or pytorch_model.bin, as EAGLE's released heads have)")
    try:
        config = json.loads((path / "config.json").read_text())
        if (path / "model.safetensors").is_file():
            from safetensors.torch import load_file
            return config, load_file(str(path / "model.safetensors"))
        if (path / "pytorch_model.bin").is_file():
            return config, torch.load(path / "pytorch_model.bin", map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 — any unreadable file gets one message
        raise SpectreeError(f"cannot read the EAGLE head in {path}: {type(e).__name__}: {e}") from None
    raise SpectreeError(f"{path} has a config.json but no model.safetensors or pytorch_model.bin (a sharded "
                        f"head is not supported: merge it into one file)")


def eagle_head(config: dict, weights: dict[str, torch.Tensor], target: PreTrainedModel,
               where: str = "the EAGLE head") -> LlamaForCausalLM:
    """The head as a `LlamaForCausalLM` on the target's device and dtype (see the module docstring);
    one `SpectreeError` when it does not fit the target or is not an EAGLE-1/2 head."""
    H, V = target.config.hidden_size, target.get_input_embeddings().weight.shape[0]
    fc_w = weights.get("fc.weight")
    if "d2t" in weights or any(k.startswith("midlayer.") for k in weights) or (
            fc_w is not None and fc_w.shape[-1] == 3 * config.get("hidden_size", -1)):
        raise SpectreeError(f"{where} is an EAGLE-3 head (fc over three target layers, d2t vocabulary map): "
                            f"only EAGLE-1/2 heads are supported")
    if config.get("hidden_size") != H or (fc_w is not None and tuple(fc_w.shape) != (H, 2 * H)):
        raise SpectreeError(f"{where} does not fit the target: hidden size {config.get('hidden_size')} "
                            f"(fc {tuple(fc_w.shape) if fc_w is not None else None}) against the target's {H}")
    if config.get("vocab_size") != target.config.vocab_size:
        raise SpectreeError(f"{where} was trained for a vocabulary of {config.get('vocab_size')} tokens, the "
                            f"target has {target.config.vocab_size}: it belongs to another target")
    emb_w = weights.get("embed_tokens.weight")
    if fc_w is None or (emb_w is not None and tuple(emb_w.shape) != (V, H)):
        raise SpectreeError(f"{where} lacks fc.weight or has an embedding of another shape "
                            f"({None if emb_w is None else tuple(emb_w.shape)} against ({V}, {H}))")
    layer_keys = [k for k in weights if k.startswith("layers.")]
    unknown = sorted(set(weights) - set(layer_keys) - {"fc.weight", "fc.bias", "embed_tokens.weight"})
    if unknown:
        raise SpectreeError(f"{where} has tensors an EAGLE-1/2 head does not: {unknown[:5]}")

    cfg = LlamaConfig.from_dict({k: v for k, v in config.items() if k not in CONFIG_DROP})
    cfg.vocab_size, cfg.head_dim = target.config.vocab_size, H // cfg.num_attention_heads  # as EAGLE's attention
    cfg.attention_bias = bool(config.get("qkv_bias", False))  # EAGLE's Qwen heads: q/k/v biases (o_proj gets 0)
    cfg._attn_implementation = target.config._attn_implementation
    dev, dtype = target.device, target.dtype
    with torch.device("meta"):
        head = LlamaForCausalLM(cfg)  # nothing allocated: every module is replaced below
    layers = []
    for i in range(cfg.num_hidden_layers):
        layer = LlamaDecoderLayer(cfg, layer_idx=i)
        if i == 0:
            layer.input_layernorm = torch.nn.Identity()  # EAGLE's layer 0 has no input norm
        state = {k.split(".", 2)[2]: v for k, v in weights.items()
                 if k.startswith(f"layers.{i}.") and not k.endswith("rotary_emb.inv_freq")}
        if cfg.attention_bias:
            state.setdefault("self_attn.o_proj.bias", torch.zeros(H))
        try:
            layer.load_state_dict(state)
        except RuntimeError as e:
            raise SpectreeError(f"{where}: layer {i} does not load: {str(e).splitlines()[-1].strip()}") from None
        layers.append(layer)
    head.model.layers = torch.nn.ModuleList(layers).to(dev, dtype)
    head.model.rotary_emb = LlamaRotaryEmbedding(cfg).to(dev)
    head.model.norm = torch.nn.Identity()  # EAGLE applies no final norm before the target's head
    fc = torch.nn.Linear(2 * H, H, bias="fc.bias" in weights)
    fc.load_state_dict({k[3:]: v for k, v in weights.items() if k.startswith("fc.")})
    embed = target.get_input_embeddings()
    if emb_w is not None and not torch.equal(emb_w.to(embed.weight), embed.weight):
        embed = torch.nn.Embedding.from_pretrained(emb_w, freeze=True)  # the head's own (EAGLE loads it over)
    head.model.embed_tokens = FeatureEmbedding(embed.to(dev, dtype), fc.to(dev, dtype))
    head.lm_head = target.lm_head
    if any(p.is_meta for p in list(head.parameters()) + list(head.buffers())):
        raise SpectreeError(f"{where}: internal error, part of the head was left unbuilt")
    for module in (*layers, head.model.embed_tokens.fc):  # the head's own modules (not the target's shared ones)
        module.eval().requires_grad_(False)
    return head.eval()


def load_eagle_drafter(path: Path, target: PreTrainedModel) -> EagleDrafter:
    """An `EagleDrafter` from an EAGLE-1/2 head folder (config.json + model.safetensors or pytorch_model.bin)
    for `target`; reads the target's last hidden state after its final norm (HF's `hidden_states[-1]` is the
    normed `last_hidden_state`)."""
    config, weights = read_eagle_folder(path)
    head = eagle_head(config, weights, target, where=f"the EAGLE head in {path}")
    return EagleDrafter(head, hidden_layer=target.config.num_hidden_layers)
