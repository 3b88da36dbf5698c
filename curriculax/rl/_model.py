"""A small decoder-only transformer policy in Flax NNX, and its functional wrappers.

The model is defined as an ``nnx.Module`` and used functionally: :func:`init_policy` splits it
once into a static ``GraphDef`` and a plain nested dict of parameter arrays (the form that
goes into a ``jit``/``scan`` carry, optax and Orbax), and the jitted functions ``nnx.merge``
the two back inside.

Positions are counted from each row's first non-PAD token, so left-padded prompts of any width
look the same to the model; PAD keys are masked out of attention.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx

from curriculax.tasks import PAD

Array = jax.Array
Params = dict[str, Any]

# Finite stand-in for -inf: a fully masked row stays finite (uniform), never NaN.
NEG_INF = -1e9


@dataclasses.dataclass(frozen=True)
class TransformerConfig:
    """Shape of the policy network (pre-LayerNorm, learned positions, causal).

    Attributes:
      vocab_size: number of token ids (``curriculax.tasks.VOCAB_SIZE`` for the embedded tasks).
      width: residual stream width.
      depth: number of transformer blocks.
      heads: attention heads; must divide ``width``.
      max_len: longest sequence (prompt plus completion) the position table covers.
      mlp_ratio: hidden width of each MLP, as a multiple of ``width``.
      positions: ``"from_bos"`` numbers positions from each row's BOS (left padding is
        invisible); ``"column"`` uses the column in the left-padded batch, so with prompts
        that end at the same column (SEP last) an output token and the prompt token it
        depends on sit at fixed columns whatever the prompt's length: for reversal, output
        ``t`` always reads column ``P - 2 - t``, one rule for every length.
      tie_embeddings: compute output logits with the token embedding matrix (no separate
        output head). On by default: copying a prompt token then only needs attention to it
        (the check that chose it: docs/studies.md).

    Example:
      >>> cfg = TransformerConfig(vocab_size=33, width=64, depth=2, heads=4, max_len=32)
    """

    vocab_size: int
    width: int = 64
    depth: int = 2
    heads: int = 4
    max_len: int = 64
    mlp_ratio: int = 4
    tie_embeddings: bool = True
    positions: str = "from_bos"

    def __post_init__(self):
        for name in ("vocab_size", "width", "depth", "heads", "max_len", "mlp_ratio"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"TransformerConfig.{name} must be an int >= 1, got {value!r}.")
        if self.positions not in ("from_bos", "column"):
            raise ValueError(
                f"TransformerConfig.positions must be 'from_bos' or 'column', got "
                f"{self.positions!r}."
            )
        if self.width % self.heads:
            raise ValueError(
                f"TransformerConfig.width={self.width} is not divisible by heads={self.heads}."
            )

    @property
    def head_dim(self) -> int:
        return self.width // self.heads


class KVCache(NamedTuple):
    """Keys and values of every layer for incremental decoding.

    Attributes:
      keys: ``f32[depth, B, S, heads, head_dim]``.
      values: ``f32[depth, B, S, heads, head_dim]``.
      key_valid: ``bool[B, S]`` positions that may be attended to (False on prompt padding).
    """

    keys: Array
    values: Array
    key_valid: Array


def positions_from_tokens(tokens: Array) -> Array:
    """``i32[B, S]`` position of each token counted from the row's first non-PAD token."""
    return jnp.maximum(jnp.cumsum(tokens != PAD, axis=-1) - 1, 0).astype(jnp.int32)


def _attend(q: Array, k: Array, v: Array, mask: Array) -> Array:
    """Masked softmax attention. q ``[B, Q, H, D]``, k/v ``[B, S, H, D]``, mask ``[B, Q, S]``."""
    scores = jnp.einsum("bqhd,bshd->bhqs", q, k) / jnp.sqrt(jnp.float32(q.shape[-1]))
    scores = jnp.where(mask[:, None], scores, NEG_INF)
    return jnp.einsum("bhqs,bshd->bqhd", jax.nn.softmax(scores, axis=-1), v)


class Block(nnx.Module):
    """One pre-LayerNorm transformer block: causal self-attention, then a GELU MLP."""

    def __init__(self, cfg: TransformerConfig, *, rngs: nnx.Rngs):
        self.heads = cfg.heads
        self.ln_attn = nnx.LayerNorm(cfg.width, rngs=rngs)
        # No bias: a key bias shifts every score of a query equally, so softmax ignores it and
        # its gradient is rounding noise, which Adam would blow up into full-size steps.
        self.qkv = nnx.Linear(cfg.width, 3 * cfg.width, use_bias=False, rngs=rngs)
        self.proj = nnx.Linear(cfg.width, cfg.width, rngs=rngs)
        self.ln_mlp = nnx.LayerNorm(cfg.width, rngs=rngs)
        self.mlp_in = nnx.Linear(cfg.width, cfg.mlp_ratio * cfg.width, rngs=rngs)
        self.mlp_out = nnx.Linear(cfg.mlp_ratio * cfg.width, cfg.width, rngs=rngs)

    def _qkv(self, x: Array) -> tuple[Array, Array, Array]:
        qkv = self.qkv(self.ln_attn(x))
        q, k, v = jnp.split(qkv, 3, axis=-1)
        split = lambda t: t.reshape(*t.shape[:-1], self.heads, -1)  # noqa: E731
        return split(q), split(k), split(v)

    def _finish(self, x: Array, attended: Array) -> Array:
        x = x + self.proj(attended.reshape(*attended.shape[:-2], -1))
        return x + self.mlp_out(jax.nn.gelu(self.mlp_in(self.ln_mlp(x))))

    def __call__(self, x: Array, mask: Array) -> tuple[Array, Array, Array]:
        """Full sequence. x ``f32[B, S, W]``, mask ``bool[B, S, S]``. Returns ``(x, k, v)``."""
        q, k, v = self._qkv(x)
        return self._finish(x, _attend(q, k, v, mask)), k, v

    def decode(
        self, x: Array, keys: Array, values: Array, index: Array, key_mask: Array
    ) -> tuple[Array, Array, Array]:
        """One new token per row at column ``index``, attending to the cache.

        Args:
          x: ``f32[B, 1, W]``.
          keys: ``f32[B, S, H, D]`` cached keys; values likewise.
          index: ``i32[]`` column of the new token.
          key_mask: ``bool[B, S]`` cache columns the new token may attend to.

        Returns:
          ``(x, keys, values)`` with the new token's key and value written at ``index``.
        """
        q, k, v = self._qkv(x)
        keys = jax.lax.dynamic_update_slice_in_dim(keys, k, index, axis=1)
        values = jax.lax.dynamic_update_slice_in_dim(values, v, index, axis=1)
        return self._finish(x, _attend(q, keys, values, key_mask[:, None, :])), keys, values


class Transformer(nnx.Module):
    """Decoder-only transformer over token ids (see :class:`TransformerConfig`)."""

    def __init__(self, cfg: TransformerConfig, *, rngs: nnx.Rngs):
        self.cfg = cfg
        self.embed = nnx.Embed(cfg.vocab_size, cfg.width, rngs=rngs)
        self.pos_embed = nnx.Embed(cfg.max_len, cfg.width, rngs=rngs)
        # Named attributes rather than a list: string keys all the way down in the params dict.
        for i in range(cfg.depth):
            setattr(self, f"block_{i}", Block(cfg, rngs=rngs))
        self.ln_final = nnx.LayerNorm(cfg.width, rngs=rngs)
        if not cfg.tie_embeddings:
            self.out = nnx.Linear(cfg.width, cfg.vocab_size, rngs=rngs)

    def head(self, h: Array) -> Array:
        """Output logits ``f32[..., V]`` from final features ``f32[..., W]``."""
        if self.cfg.tie_embeddings:
            return self.embed.attend(h)
        return self.out(h)

    def blocks(self) -> list[Block]:
        return [getattr(self, f"block_{i}") for i in range(self.cfg.depth)]

    def _check_len(self, length: int) -> None:
        if length > self.cfg.max_len:
            raise ValueError(
                f"sequence of {length} tokens exceeds TransformerConfig.max_len="
                f"{self.cfg.max_len}; raise max_len to at least {length}."
            )

    def features(self, tokens: Array) -> tuple[Array, list[tuple[Array, Array]]]:
        """Causal forward pass up to the final LayerNorm.

        Args:
          tokens: ``i32[B, S]`` left-padded sequences.

        Returns:
          ``(h f32[B, S, W], [(k, v) per layer, each f32[B, S, H, D]])``.
        """
        self._check_len(tokens.shape[-1])
        valid = tokens != PAD
        length = tokens.shape[-1]
        causal = jnp.tril(jnp.ones((length, length), bool))
        # A query may always see itself, so rows of padding never attend to nothing.
        mask = causal[None] & (valid[:, None, :] | jnp.eye(length, dtype=bool)[None])
        if self.cfg.positions == "column":
            positions = jnp.broadcast_to(jnp.arange(length, dtype=jnp.int32), tokens.shape)
        else:
            positions = positions_from_tokens(tokens)
        x = self.embed(tokens) + self.pos_embed(positions)
        kvs = []
        for block in self.blocks():
            x, k, v = block(x, mask)
            kvs.append((k, v))
        return self.ln_final(x), kvs

    def __call__(self, tokens: Array) -> Array:
        """``i32[B, S]`` tokens -> ``f32[B, S, V]`` next-token logits."""
        return self.head(self.features(tokens)[0])

    def prefill(self, prompts: Array, cache_len: int) -> tuple[Array, KVCache]:
        """Runs the prompts and sets up a cache of ``cache_len`` columns.

        Args:
          prompts: ``i32[B, P]`` left-padded prompts.
          cache_len: total columns (prompt plus tokens to generate).

        Returns:
          ``(logits f32[B, V] after the last prompt token, cache)``.
        """
        self._check_len(cache_len)
        h, kvs = self.features(prompts)
        batch, prompt_width = prompts.shape
        pad = ((0, 0), (0, cache_len - prompt_width), (0, 0), (0, 0))
        keys = jnp.stack([jnp.pad(k, pad) for k, _ in kvs])
        values = jnp.stack([jnp.pad(v, pad) for _, v in kvs])
        key_valid = jnp.concatenate(
            [prompts != PAD, jnp.ones((batch, cache_len - prompt_width), bool)], axis=1
        )
        return self.head(h[:, -1]), KVCache(keys, values, key_valid)

    def decode(
        self, token: Array, position: Array, index: Array, cache: KVCache
    ) -> tuple[Array, KVCache]:
        """Feeds one token per row at cache column ``index``.

        Args:
          token: ``i32[B]``.
          position: ``i32[B]`` its position (counted from BOS).
          index: ``i32[]`` cache column it occupies.
          cache: the :class:`KVCache` from :meth:`prefill` or the previous call.

        Returns:
          ``(logits f32[B, V] for the next token, cache)``.
        """
        if self.cfg.positions == "column":
            position = jnp.broadcast_to(jnp.asarray(index, jnp.int32), token.shape)
        x = (self.embed(token) + self.pos_embed(position))[:, None, :]
        key_mask = cache.key_valid & (jnp.arange(cache.key_valid.shape[1]) <= index)[None]
        new_keys, new_values = [], []
        for i, block in enumerate(self.blocks()):
            x, k, v = block.decode(x, cache.keys[i], cache.values[i], index, key_mask)
            new_keys.append(k)
            new_values.append(v)
        logits = self.head(self.ln_final(x[:, 0]))
        return logits, cache._replace(keys=jnp.stack(new_keys), values=jnp.stack(new_values))


def init_policy(cfg: TransformerConfig, key: Array) -> tuple[nnx.GraphDef, Params]:
    """Builds a :class:`Transformer` and splits it into its graph and a params dict.

    Args:
      cfg: model shape.
      key: PRNG key for the initial weights.

    Returns:
      ``(graphdef, params)``: a static ``nnx.GraphDef`` (hashable, close over it) and a nested
      dict of ``f32`` arrays with string keys (a plain pytree for jit, optax and Orbax).

    Example:
      >>> cfg = TransformerConfig(vocab_size=33, width=16, depth=1, heads=2, max_len=16)
      >>> graphdef, params = init_policy(cfg, jax.random.key(0))
      >>> tokens = jnp.array([[0, 1, 5, 17, 2]])      # <pad> <bos> <rev> s0 <sep>
      >>> logits = jax.jit(apply_policy, static_argnums=0)(graphdef, params, tokens)
      >>> logits.shape
      (1, 5, 33)
    """
    graphdef, state = nnx.split(Transformer(cfg, rngs=nnx.Rngs(params=key)))
    return graphdef, nnx.to_pure_dict(state)


def policy_graphdef(cfg: TransformerConfig) -> nnx.GraphDef:
    """The ``GraphDef`` of a :class:`Transformer` with ``cfg``, without allocating weights."""
    graphdef, _ = nnx.split(nnx.eval_shape(lambda: Transformer(cfg, rngs=nnx.Rngs(0))))
    return graphdef


def apply_policy(graphdef: nnx.GraphDef, params: Params, tokens: Array) -> Array:
    """Next-token logits ``f32[B, S, V]`` for left-padded ``i32[B, S]`` tokens."""
    return nnx.merge(graphdef, params)(tokens)
