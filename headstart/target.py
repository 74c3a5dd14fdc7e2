"""The frozen target: a stock Hugging Face causal LM with feature taps and tree-shaped forwards.

Nothing here copies modeling code. The target runs its own base model (`model.base_model`), so the
last hidden state after the final norm is what every head reads; logits are computed only where
they are needed (`Target.logits`). Tree verification is one ordinary forward with a custom 4D float
attention mask (0 where a query may attend a key, the dtype's minimum elsewhere), explicit
`position_ids` and a `DynamicCache`; this reproduces the sequential logits exactly in float32.
"""

from __future__ import annotations

import hashlib
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from headstart.errors import HeadstartError

_DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}


#: oneDNN ISA caps (ONEDNN_MAX_CPU_ISA) without native bf16 dot products: bf16 is emulated under them
_BELOW_BF16 = frozenset({"SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX2_VNNI_2", "AVX512_CORE", "AVX512_CORE_VNNI"})


def native_bf16() -> bool:
    """Whether bf16 matmuls are fast here: a CUDA GPU, or a CPU with AVX512-BF16 or AMX.

    On CPUs without them (AVX2 only) PyTorch emulates bf16, which makes multi-token and training
    forwards far slower than in float32 (docs/results.md#bf16-and-float32-on-cpus), so there float32
    is the faster dtype. A CPU capped below bf16 by oneDNN's own variable (`ONEDNN_MAX_CPU_ISA=AVX2`,
    which PyTorch's bf16 matmuls obey) counts as one without them: that is how an AVX512 machine runs
    what an AVX2 one would (docs/training.md#dtype).
    """
    if torch.cuda.is_available():
        return True
    if os.environ.get("ONEDNN_MAX_CPU_ISA", "").upper() in _BELOW_BF16:
        return False
    flags = cpu_flags()
    return "avx512_bf16" in flags or "amx_bf16" in flags


def cpu_flags() -> set[str]:
    """The CPU's feature flags as /proc/cpuinfo lists them (what `lscpu` shows); empty where it cannot be read."""
    try:
        return set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return set()


def cpu_kind() -> str:
    """The CPU as speed figures name it: "AVX512-BF16 + AMX", "AVX512-BF16", "AVX512" or "AVX2", and the
    instruction caps in force (`capped: ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2`), if any."""
    flags = cpu_flags()
    if "avx512_bf16" in flags:
        kind = "AVX512-BF16" + (" + AMX" if "amx_bf16" in flags else "")
    else:
        kind = "AVX512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    caps = [f"{k}={os.environ[k]}" for k in ("ONEDNN_MAX_CPU_ISA", "ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS") if os.environ.get(k)]
    return kind + (f" (capped: {' '.join(caps)})" if caps else "")


def resolve_dtype(dtype: str | torch.dtype) -> torch.dtype:
    """'bfloat16' -> torch.bfloat16; 'auto' -> bfloat16 where it is fast (`native_bf16`), else float32."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype == "auto":
        return torch.bfloat16 if native_bf16() else torch.float32
    if dtype not in _DTYPES:
        raise TargetError(f"the target's dtype (target.dtype) must be one of {sorted(_DTYPES)} or 'auto', got {dtype!r}")
    return _DTYPES[dtype]


def is_partitioned(param: torch.Tensor) -> bool:
    """Whether DeepSpeed ZeRO-3 holds this parameter in slices across processes: its `.data` is
    empty outside the forward of its module (and of `gathered`)."""
    return hasattr(param, "ds_id")


@contextmanager
def gathered(params):
    """Whole parameters inside the block where ZeRO-3 partitions them; nothing to do otherwise.

    It is a collective: under ZeRO-3 every process must enter it, with the same parameters.
    """
    params = [p for p in params if is_partitioned(p)]
    if not params:
        yield
        return
    import deepspeed

    with deepspeed.zero.GatheredParameters(params):
        yield


def float_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(Q, K) or (B, Q, K) bool pattern -> (1 or B, 1, Q, K) additive attention mask: 0 where
    allowed, the dtype's minimum elsewhere (what HF attention adds to its scores)."""
    mask = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    mask.masked_fill_(~allowed, torch.finfo(dtype).min)
    return mask[:, None] if mask.ndim == 3 else mask[None, None]


class WeightRows:
    """A detached copy of some rows of a frozen weight (the target lm_head's rows of a draft
    vocabulary), made once and remade only when the weight moves, changes dtype or the rows change.

    The copy is a plain tensor: a partitioned (ZeRO-3) weight is gathered once to make it, and
    autograd never holds the weight itself.
    """

    def __init__(self):
        self._cache: tuple | None = None  # (weight identity, ids, rows)

    def __call__(self, weight: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        where = "zero3" if is_partitioned(weight) else (weight.data_ptr(), weight.device)
        key = (id(weight), weight.dtype, where)
        cache = self._cache
        if cache is None or cache[0] != key or not torch.equal(cache[1], ids):
            with gathered([weight]):
                rows = weight.detach()[ids.to(weight.device)]
            self._cache = cache = (key, ids.clone(), rows)
        return cache[2]


class TargetError(HeadstartError):
    """A target that cannot be loaded: no such folder, or a Hub id the Hub cannot be reached for."""


@contextmanager
def target_loading(path_or_id):
    """transformers' OSError (a missing folder or file, an unknown or unreachable Hub id) as one TargetError."""
    try:
        yield
    except OSError as e:
        why = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise TargetError(f"cannot load the target {str(path_or_id)!r}: {why} Give a model folder (config.json, weights and "
                          f"tokenizer), 'embedded' (SmolLM2-135M-Instruct, shipped), or a Hub id with the Hub reachable.") from e


@dataclass
class TargetOutput:
    hidden: torch.Tensor  # (B, T, D) last hidden state, after the final norm
    features: dict[int, torch.Tensor]  # layer id -> (B, T, D) output of that decoder layer


class Target:
    """A frozen causal LM: `requires_grad_(False)`, eval mode, never saved with a head."""

    def __init__(self, model: nn.Module, tokenizer=None, name: str | None = None, revision: str | None = None):
        model.requires_grad_(False)
        model.eval()
        self.model = model
        self.tokenizer = tokenizer
        self.name = name or getattr(model.config, "name_or_path", None) or "unknown"
        self.revision = revision
        self.config = model.config
        self.base = model.base_model
        self.layers = self._find_layers()
        # Medusa-2: LoRA adapters trained with the heads (headstart.adapter). While set, the
        # target that decodes and verifies is the adapted model; this records where they came from.
        self.adapter: dict | None = None

    @classmethod
    def from_pretrained(
        cls,
        path_or_id: str | Path,
        dtype: str | torch.dtype = torch.bfloat16,
        name: str | None = None,
        revision: str | None = None,
        attn_implementation: str = "sdpa",
        device: str | torch.device | None = None,
        pack_linears: bool = False,
        **kwargs,
    ) -> "Target":
        """Load any HF causal LM (a folder or a Hub id), frozen. 'embedded' means SmolLM2-135M.
        pack_linears: on CPU, reorder its Linear weights for oneDNN (`Target.pack_linears`)."""
        if str(path_or_id) == "embedded":
            from headstart.embedded import HUB_ID, embedded_model_path

            path_or_id, name = embedded_model_path(), name or HUB_ID
        from transformers import AutoModelForCausalLM, AutoTokenizer

        with target_loading(path_or_id):
            model = AutoModelForCausalLM.from_pretrained(
                path_or_id,
                dtype=resolve_dtype(dtype),
                revision=revision,
                attn_implementation=attn_implementation,
                **kwargs,
            )
            if device is not None and not is_partitioned(next(model.parameters())):
                model.to(device)  # a ZeRO-3 target (loaded under zero.Init) already sits where DeepSpeed put it
            tokenizer = AutoTokenizer.from_pretrained(path_or_id, revision=revision)
        target = cls(model, tokenizer, name=name or str(path_or_id), revision=revision)
        if pack_linears:
            target.pack_linears()
        return target

    def pack_linears(self) -> int:
        """On CPU, reorder every Linear weight once into oneDNN's layout, so that forwards without
        gradients (decoding, distillation, features) run faster (headstart/packed.py); returns how
        many were packed (0 off the CPU or under ZeRO-3). Costs the Linear weights' memory again."""
        from headstart.packed import pack_linears

        return pack_linears(self.model)

    # ---- shape facts that heads and checkpoints check against ----
    @property
    def hidden_size(self) -> int:
        return self.config.hidden_size

    @property
    def vocab_size(self) -> int:
        w = self.lm_head.weight
        return getattr(w, "ds_shape", w.shape)[0]  # ZeRO-3 keeps the whole shape beside an empty tensor

    @property
    def num_layers(self) -> int:
        return self.config.num_hidden_layers

    @property
    def max_position_embeddings(self) -> int | None:
        return getattr(self.config, "max_position_embeddings", None)

    @property
    def dtype(self) -> torch.dtype:
        return self.lm_head.weight.dtype

    @property
    def device(self) -> torch.device:
        if self.partitioned:  # the slices may be offloaded; computation happens on the accelerator
            from deepspeed.accelerator import get_accelerator

            return torch.device(get_accelerator().current_device_name())
        return self.lm_head.weight.device

    @property
    def partitioned(self) -> bool:
        """Whether DeepSpeed ZeRO-3 partitions the weights across processes (the target was loaded under
        `zero.Init`: see `headstart.train.trainer.zero3_loading`)."""
        return is_partitioned(self.lm_head.weight)

    @property
    def embed_tokens(self) -> nn.Module:
        return self.model.get_input_embeddings()

    @property
    def lm_head(self) -> nn.Linear:
        return self.model.get_output_embeddings()

    def default_feature_layers(self) -> list[int]:
        """Low, middle and high layers for EAGLE-3, as ids of decoder layers whose *output* is read.

        SGLang and vLLM capture the stream *entering* layers (2, n // 2, n - 3), which is the
        output of layers (1, n // 2 - 1, n - 4): the same tensors. Exports add 1 to our ids.
        """
        n = self.num_layers
        if n >= 8:
            return [1, n // 2 - 1, n - 4]
        return [0, (n - 1) // 2, n - 1]  # tiny test models: first, middle and last layer

    def describe(self) -> dict:
        """What a head's config.json records about the target it was trained for.

        The name is how the user spelled the target: information only, since one folder has many
        spellings and may move. `fingerprint` identifies the target, and is what loading a head
        checks: architecture, shapes, and a SHA-256 of a few embedding rows rounded to bfloat16, so
        that a float32 and a bfloat16 load of the same weights agree and another model of the same
        architecture does not. Under ZeRO-3 a process holds only a slice of the embedding, and
        gathering it is a collective that the one process saving a head cannot start alone: the
        hash is then None, and not compared.
        """
        w = self.embed_tokens.weight
        embedding_sha256 = None
        if not (is_partitioned(w) or w.is_meta or w.numel() == 0):
            ids = torch.linspace(0, w.shape[0] - 1, 8).round().long().to(w.device)
            rows = w.detach()[ids].to(torch.bfloat16).cpu().contiguous()  # (8, D)
            embedding_sha256 = hashlib.sha256(rows.view(torch.int16).numpy().tobytes()).hexdigest()
        return {
            "name_or_path": self.name,
            "revision": self.revision,
            "model_type": self.config.model_type,
            "hidden_size": self.hidden_size,
            "vocab_size": self.vocab_size,
            "num_hidden_layers": self.num_layers,
            "max_position_embeddings": self.max_position_embeddings,
            "fingerprint": {
                "architecture": type(self.model).__name__,
                "hidden_size": self.hidden_size,
                "num_hidden_layers": self.num_layers,
                "vocab_size": self.vocab_size,
                "embedding_sha256": embedding_sha256,
            },
        }

    # ---- forwards ----
    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The target's own output head on hidden states (B, T, D) -> (B, T, V), with softcapping."""
        return self.softcap(self.lm_head(hidden))

    def softcap(self, logits: torch.Tensor) -> torch.Tensor:
        """The target's final-logit softcapping, cap · tanh(logits / cap) (Gemma 2 and 3), on logits
        computed from its lm_head rows; logits unchanged for models without one."""
        cap = getattr(self.config, "final_logit_softcapping", None)
        return torch.tanh(logits / cap) * cap if cap else logits

    @torch.no_grad()
    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | dict | None = None,
        position_ids: torch.Tensor | None = None,
        cache=None,
        feature_layers: list[int] | tuple[int, ...] = (),
    ) -> TargetOutput:
        """Run the base model over input_ids (B, T); hook only the decoder layers asked for."""
        return self.forward_with_grad(input_ids, attention_mask, position_ids, cache, feature_layers)

    __call__ = forward

    def forward_with_grad(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | dict | None = None,
        position_ids: torch.Tensor | None = None,
        cache=None,
        feature_layers: list[int] | tuple[int, ...] = (),
    ) -> TargetOutput:
        """`forward` without `no_grad`: Medusa-2 trains LoRA adapters on the target through it."""
        features: dict[int, torch.Tensor] = {}
        handles = [self.layers[i].register_forward_hook(self._tap(i, features)) for i in feature_layers]
        try:
            out = self.base(
                input_ids=input_ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                cache=cache,
                use_cache=cache is not None,
            )
        finally:
            for h in handles:
                h.remove()
        return TargetOutput(hidden=out.last_hidden_state, features=features)

    def tree_forward(
        self,
        input_ids: torch.Tensor,
        visible: torch.Tensor,
        positions: torch.Tensor,
        cache,
        past_len: int,
        feature_layers: list[int] | tuple[int, ...] = (),
    ) -> TargetOutput:
        """Forward N new tokens (B, N) that form a tree over a cached prefix of `past_len` tokens.

        visible (N, N) bool: node i may attend node j (its ancestors and itself). positions (B, N):
        absolute positions (prefix length + depth). The prefix is fully visible to every node.
        """
        b, n = input_ids.shape
        prefix_valid = torch.ones(b, past_len, dtype=torch.bool, device=input_ids.device)
        prefix_pos = torch.arange(past_len, device=positions.device).expand(b, -1)
        return self.batch_tree_forward(
            input_ids, visible.expand(b, n, n), positions, cache, prefix_valid, prefix_pos, feature_layers
        )

    def batch_tree_forward(
        self,
        input_ids: torch.Tensor,
        visible: torch.Tensor,
        positions: torch.Tensor,
        cache,
        prefix_valid: torch.Tensor,
        prefix_pos: torch.Tensor,
        feature_layers: list[int] | tuple[int, ...] = (),
    ) -> TargetOutput:
        """Forward a tree of Q inputs per row (B, Q) over cached slots that differ from row to row.

        visible (B, Q, Q) bool: what each input may attend within its row's tree. positions (B, Q):
        absolute positions in the row's own sequence. prefix_valid (B, L) bool: the cached slots a
        row may attend (padding and holes left by other rows are not); prefix_pos (B, L): their
        positions, which sliding-window layers compare with the queries'.
        """
        q = input_ids.shape[1]
        allowed = torch.cat([prefix_valid[:, None, :].expand(-1, q, -1), visible], dim=2)  # (B, Q, L + Q)
        key_pos = torch.cat([prefix_pos, positions], dim=1)  # (B, L + Q)
        mask = self.attention_mask(allowed, positions, key_pos)
        return self.forward(input_ids, mask, positions, cache, feature_layers)

    def attention_mask(self, allowed: torch.Tensor, query_pos: torch.Tensor, key_pos: torch.Tensor):
        """A 4D float mask (B, 1, Q, K) from a bool pattern; sliding-window layers get their window.

        allowed (B, Q, K) with positions query_pos (B, Q) and key_pos (B, K), or (Q, K), (Q,), (K,)
        for a batch of one. Models whose config lists `layer_types` take a dict keyed by layer type;
        Mistral-style models with one `sliding_window` for all layers take the windowed mask alone.
        """
        window = getattr(self.config, "sliding_window", None)
        layer_types = getattr(self.config, "layer_types", None)
        windowed = None
        if window:
            windowed = allowed & (key_pos[..., None, :] > query_pos[..., :, None] - window)
        if layer_types and "sliding_attention" in layer_types:
            return {
                "full_attention": float_mask(allowed, self.dtype),
                "sliding_attention": float_mask(windowed if windowed is not None else allowed, self.dtype),
            }
        if windowed is not None and layer_types is None and self.config.model_type in ("mistral", "mixtral"):
            return float_mask(windowed, self.dtype)
        return float_mask(allowed, self.dtype)

    def new_cache(self):
        """An empty growing cache with a full-length layer per decoder layer (rollback needs them)."""
        from transformers import DynamicCache

        return DynamicCache()

    # ---- internals ----
    def _find_layers(self) -> nn.ModuleList:
        layers = getattr(self.base, "layers", None)
        if isinstance(layers, nn.ModuleList):
            return layers
        for module in self.base.modules():
            if isinstance(module, nn.ModuleList) and len(module) == self.config.num_hidden_layers:
                return module
        raise TypeError(f"cannot find the decoder layers of {type(self.model).__name__}")

    @staticmethod
    def _tap(layer_id: int, store: dict):
        def hook(module, args, output):
            store[layer_id] = output[0] if isinstance(output, tuple) else output

        return hook
