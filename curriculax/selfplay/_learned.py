"""A learned challenger: a small generator policy trained by policy gradient on the judge's gain.

The generator (Flax NNX, a tiny MLP) proposes a task as a level and a symbol sequence: the level
from a learned categorical, then each symbol of that level's length from a distribution the MLP
computes from the level's embedding. ``propose`` scores the round's proposals and takes one
GRPO-style step (advantages normalized over the round's proposals, optax Adam): a proposal's
reward is the judge's unbiased split-half gain (latest - baseline pass rate) when it was judged
this round, 0 when it was not (dropped as easy, rejected as a held-out collision or as a task
already on the frontier, not yet judged), at most 0 when the validity gate rejected it, minus a
penalty when it repeats a proposal of the same round or one of the last ``memory`` proposals.

The whole state (params, optimizer state, RNG, the recent-proposal memory, counters) lives in the
spec, so ``curriculum_evolve`` carries it between rounds like any other challenger's spec and
checkpoints it with the run (``Challenger.checkpoint``; :func:`restore_learned` reads it back).
The arithmetic (sampling, rewards, repeats, the update) is pure JAX with fixed shapes; the host
part is building each payload and matching the judge's verdicts to proposals by key.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from curriculax._checks import check_seed
from curriculax._random import seed_key
from curriculax.credit import grpo_advantages
from curriculax.selfplay._challenger import Challenger, InvalidTask

Array = jax.Array

# Proposal batches are padded to a multiple of this, so the update compiles for a few shapes.
_BUCKET = 32


@dataclasses.dataclass(frozen=True)
class LearnedConfig:
    """The learned challenger's generator and its training.

    Attributes:
      num_levels: levels the generator proposes (``0 .. num_levels - 1``).
      num_symbols: symbols per position (``0 .. num_symbols - 1``).
      min_length: sequence length at level 0 (level ``l`` has ``min_length + l`` symbols).
      width: hidden width of the MLP.
      depth: hidden layers of the MLP (0: the symbol logits are linear in the level embedding).
      learning_rate: Adam step size.
      entropy: entropy bonus weight (keeps the generator from collapsing on one proposal).
      repeat_penalty: subtracted from the reward of a proposal equal to an earlier one of the
        same round or to one of the last ``memory`` proposals (>= 0).
      invalid_reward: reward of a proposal the validity gate rejects (<= 0: never positive;
        the default -1 is the lowest gain a judged task can have, so an invalid proposal is
        never preferred to a valid one that is not a repeat: with 0, the round-normalized
        advantage would favour it over proposals penalized as repeats).
      memory: how many recent proposals (their content keys) the repeat check remembers
        across rounds; 0: only duplicates within a round are penalized.
      scale_by_std: divide the advantages by the round's reward std (GRPO); else centre only.
      seed: initial weights and RNG.
    """

    num_levels: int
    num_symbols: int
    min_length: int = 1
    width: int = 32
    depth: int = 1
    learning_rate: float = 0.1
    entropy: float = 0.01
    repeat_penalty: float = 0.5
    invalid_reward: float = -1.0
    memory: int = 256
    scale_by_std: bool = True
    seed: int = 0

    def __post_init__(self):
        for name, low in (
            ("num_levels", 1),
            ("num_symbols", 1),
            ("min_length", 1),
            ("width", 1),
            ("depth", 0),
            ("memory", 0),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(
                    f"learned challenger: {name} must be an int >= {low}, got {value!r}"
                )
        for name in ("learning_rate", "entropy", "repeat_penalty", "invalid_reward"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ValueError(f"learned challenger: {name} must be a number, got {value!r}")
            if not math.isfinite(value):  # NaN passes every comparison below
                raise ValueError(f"learned challenger: {name} must be finite, got {value!r}")
        if not self.learning_rate > 0:
            raise ValueError(
                f"learned challenger: learning_rate must be > 0, got {self.learning_rate!r}"
            )
        if self.entropy < 0 or self.repeat_penalty < 0:
            raise ValueError(
                "learned challenger: entropy and repeat_penalty must be >= 0, got "
                f"entropy={self.entropy!r}, repeat_penalty={self.repeat_penalty!r}"
            )
        if self.invalid_reward > 0:
            raise ValueError(
                f"learned challenger: invalid_reward must be <= 0 (an invalid proposal is never "
                f"rewarded), got {self.invalid_reward!r}"
            )
        if not isinstance(self.scale_by_std, bool):
            raise ValueError(
                f"learned challenger: scale_by_std must be a bool, got {self.scale_by_std!r}"
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"learned challenger: seed must be an int, got {self.seed!r}")
        check_seed(self.seed, "learned challenger: seed")

    @property
    def max_length(self) -> int:
        """Symbols of the longest level (the token axis of every proposal)."""
        return self.min_length + self.num_levels - 1


def learned_config(
    data: Mapping[str, Any] | LearnedConfig | None = None,
    *,
    where: str = "learned challenger",
    **defaults,
) -> LearnedConfig:
    """A :class:`LearnedConfig` from a mapping (a config table), the family's ``defaults``
    (``num_levels``, ``num_symbols``, ``min_length``) filled in where the table has none.

    Args:
      data: the table (or a config, returned as is).
      where: the table's name in error messages (e.g. ``"learned"``, a study's config key).
      **defaults: the family's shape.

    Raises:
      ValueError: naming the unknown key (``where.key``) and the accepted ones, or the bad
        value.
    """
    if isinstance(data, LearnedConfig):
        return data
    if data is not None and not isinstance(data, Mapping):
        raise ValueError(f"{where}: expected a table of LearnedConfig keys, got {data!r}")
    data = dict(data or {})
    accepted = sorted(f.name for f in dataclasses.fields(LearnedConfig))
    unknown = sorted(set(data) - set(accepted))
    if unknown:
        raise ValueError(
            f"{where}: unknown key(s) {[f'{where}.{k}' for k in unknown]}; accepted keys are "
            f"{accepted}"
        )
    try:
        return LearnedConfig(**{**defaults, **data})
    except ValueError as e:
        raise ValueError(f"{where}: {e}".replace("learned challenger: ", "")) from None


class Generator(nnx.Module):
    """The generator: level logits ``f32[L]`` (a learned bias) and, per level, symbol logits
    ``f32[T, S]`` from an MLP over the level's embedding. The output layer starts at 0, so the
    first proposals are uniform over levels and symbols."""

    def __init__(self, cfg: LearnedConfig, *, rngs: nnx.Rngs):
        self.num_levels = cfg.num_levels
        self.shape = (cfg.max_length, cfg.num_symbols)
        self.level_logits = nnx.Param(jnp.zeros((cfg.num_levels,), jnp.float32))
        self.embed = nnx.Embed(cfg.num_levels, cfg.width, rngs=rngs)
        self.hidden = nnx.List(
            [nnx.Linear(cfg.width, cfg.width, rngs=rngs) for _ in range(cfg.depth)]
        )
        self.head = nnx.Linear(
            cfg.width,
            cfg.max_length * cfg.num_symbols,
            kernel_init=nnx.initializers.zeros_init(),
            rngs=rngs,
        )

    def __call__(self, levels: Array) -> tuple[Array, Array]:
        """``(level logits f32[L], symbol logits f32[P, T, S])`` for ``levels: i32[P]``."""
        h = self.embed(levels)
        for layer in self.hidden:
            h = jax.nn.relu(layer(h))
        return self.level_logits[...], self.head(h).reshape(levels.shape + self.shape)


class LearnedState:
    """The learned challenger's state (a pytree; its ``repr`` is a one-line summary, so run
    records holding a spec stay small).

    Attributes:
      params: the generator's parameters (a nested dict of ``f32`` arrays).
      opt_state: the optax state.
      rng: ``u32[2]`` key data; mixed into every proposal's key, split at each update.
      recent: ``u32[R]`` content keys of the last ``R`` proposals (a ring).
      recent_mask: ``bool[R]`` which ring slots hold a proposal.
      cursor: ``i32[]`` the ring's next slot.
      updates: ``i32[]`` policy-gradient updates done.
      proposals: ``i32[]`` proposals trained on.
      invalid: ``i32[]`` of them rejected by the validity gate.
      repeats: ``i32[]`` of them penalized as repeats.
    """

    _fields = (
        "params",
        "opt_state",
        "rng",
        "recent",
        "recent_mask",
        "cursor",
        "updates",
        "proposals",
        "invalid",
        "repeats",
    )

    def __init__(self, **kwargs):
        missing = set(self._fields) - set(kwargs)
        if missing or set(kwargs) - set(self._fields):
            raise TypeError(f"LearnedState takes exactly {self._fields}, got {sorted(kwargs)}")
        for k in self._fields:
            setattr(self, k, kwargs[k])

    def replace(self, **kwargs) -> LearnedState:
        return LearnedState(**{**self.as_dict(), **kwargs})

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self._fields}

    def tree_flatten_with_keys(self):
        return [(jax.tree_util.DictKey(k), getattr(self, k)) for k in self._fields], None

    def tree_flatten(self):
        return [getattr(self, k) for k in self._fields], None

    @classmethod
    def tree_unflatten(cls, aux, children):
        del aux
        return cls(**dict(zip(cls._fields, children)))

    def __repr__(self) -> str:
        def num(x):
            try:
                return int(np.asarray(x))
            except Exception:  # traced or abstract: no value to show
                return "?"

        return (
            f"LearnedState(updates={num(self.updates)}, proposals={num(self.proposals)}, "
            f"invalid={num(self.invalid)}, repeats={num(self.repeats)})"
        )


jax.tree_util.register_pytree_with_keys_class(LearnedState)


def init_generator(cfg: LearnedConfig, key: Array) -> tuple[nnx.GraphDef, dict]:
    """``(graphdef, params)``: the :class:`Generator` split into its static graph and a plain
    nested dict of arrays (as :func:`curriculax.rl.init_policy` does)."""
    graphdef, state = nnx.split(Generator(cfg, rngs=nnx.Rngs(params=key)))
    return graphdef, nnx.to_pure_dict(state)


def _optimizer(cfg: LearnedConfig) -> optax.GradientTransformation:
    return optax.adam(cfg.learning_rate)


def _level_probs(graphdef: nnx.GraphDef, params: dict) -> Array:
    logits, _ = nnx.merge(graphdef, params)(jnp.zeros((1,), jnp.int32))
    return jax.nn.softmax(logits)


def sample_proposal(
    graphdef: nnx.GraphDef, params: dict, rng: Array, key: Array, min_length: int
) -> tuple[Array, Array]:
    """One proposal: ``(level i32[], tokens i32[T])``, tokens past the level's length 0.

    Args:
      graphdef: the generator's graph.
      params: its parameters.
      rng: ``u32[2]`` the state's key data, mixed into ``key``.
      key: the proposal's key (from the runner).
      min_length: sequence length at level 0.
    """
    model = nnx.merge(graphdef, params)
    salt = jax.random.bits(jax.random.wrap_key_data(rng), dtype=jnp.uint32)
    k_level, k_tokens = jax.random.split(jax.random.fold_in(key, salt))
    level_logits, _ = model(jnp.zeros((1,), jnp.int32))
    level = jax.random.categorical(k_level, level_logits).astype(jnp.int32)
    _, symbol_logits = model(level[None])
    tokens = jax.random.categorical(k_tokens, symbol_logits[0]).astype(jnp.int32)
    live = jnp.arange(tokens.shape[0]) < min_length + level
    return level, jnp.where(live, tokens, 0)


def log_probs(
    graphdef: nnx.GraphDef, params: dict, levels: Array, tokens: Array, min_length: int
) -> tuple[Array, Array]:
    """``(log-probability f32[P], entropy f32[P])`` of proposals under the generator.

    Args:
      levels: ``i32[P]``.
      tokens: ``i32[P, T]`` (positions past a proposal's length are ignored).
    """
    level_logits, symbol_logits = nnx.merge(graphdef, params)(levels)
    level_lp = jax.nn.log_softmax(level_logits)
    sym_lp = jax.nn.log_softmax(symbol_logits)  # [P, T, S]
    live = jnp.arange(tokens.shape[1])[None, :] < (min_length + levels)[:, None]
    tok_lp = jnp.take_along_axis(sym_lp, tokens[..., None], axis=-1)[..., 0]
    lp = level_lp[levels] + jnp.sum(jnp.where(live, tok_lp, 0.0), axis=1)
    level_ent = -jnp.sum(jnp.exp(level_lp) * level_lp)
    sym_ent = -jnp.sum(jnp.exp(sym_lp) * sym_lp, axis=-1)  # [P, T]
    return lp, level_ent + jnp.sum(jnp.where(live, sym_ent, 0.0), axis=1)


def repeated(keys: Array, mask: Array, recent: Array, recent_mask: Array) -> Array:
    """``bool[P]``: proposals equal to an earlier proposal of the batch or to a remembered one.

    Args:
      keys: ``u32[P]`` content keys.
      mask: ``bool[P]`` real entries.
      recent: ``u32[R]`` remembered keys; ``recent_mask: bool[R]`` which are real.
    """
    same = (keys[:, None] == keys[None, :]) & mask[None, :]
    earlier = jnp.tril(same, k=-1).any(axis=1)
    remembered = ((keys[:, None] == recent[None, :]) & recent_mask[None, :]).any(axis=1)
    return (earlier | remembered) & mask


def remember(
    recent: Array, recent_mask: Array, cursor: Array, keys: Array, mask: Array
) -> tuple[Array, Array, Array]:
    """The ring after writing the batch's real keys in order (the last ``R`` of them)."""
    size = recent.shape[0]
    order = jnp.argsort(~mask, stable=True)  # real entries first, in their order
    keys, mask = keys[order], mask[order]
    count = mask.sum()
    rank = jnp.arange(keys.shape[0])
    write = mask & (rank >= count - size)
    slot = jnp.where(write, (cursor + rank) % size, size)  # size: out of range, dropped
    recent = recent.at[slot].set(keys, mode="drop")
    recent_mask = recent_mask.at[slot].set(True, mode="drop")
    return recent, recent_mask, ((cursor + count) % size).astype(jnp.int32)


def proposal_rewards(
    gain: Array,
    judged: Array,
    valid: Array,
    repeat: Array,
    *,
    repeat_penalty: float,
    invalid_reward: float,
) -> Array:
    """``f32[P]``: each proposal's reward.

    The judge's gain where the proposal was judged, else 0; ``min(invalid_reward, 0)`` where
    the validity gate rejected it (an invalid proposal is never judged and never rewarded);
    minus ``repeat_penalty`` where it repeats an earlier proposal.
    """
    base = jnp.where(judged, gain, 0.0)
    reward = jnp.where(valid, base, jnp.minimum(invalid_reward, 0.0))
    return reward - repeat_penalty * repeat.astype(jnp.float32)


def learned_spec(cfg: LearnedConfig) -> dict:
    """The initial spec: ``{"level": int, "probs": tuple[float, ...], "state": LearnedState}``
    (``level`` the generator's most likely level and ``probs`` its level distribution, for
    tables and records; ``state`` everything the challenger learns)."""
    root = seed_key(cfg.seed)
    graphdef, params = init_generator(cfg, root)
    del graphdef
    r = max(cfg.memory, 1)
    state = LearnedState(
        params=params,
        opt_state=_optimizer(cfg).init(params),
        rng=jax.random.key_data(jax.random.fold_in(root, 1)),
        recent=jnp.zeros((r,), jnp.uint32),
        recent_mask=jnp.zeros((r,), bool),
        cursor=jnp.int32(0),
        updates=jnp.int32(0),
        proposals=jnp.int32(0),
        invalid=jnp.int32(0),
        repeats=jnp.int32(0),
    )
    return _spec(state, np.full(cfg.num_levels, 1.0 / cfg.num_levels))


def _spec(state: LearnedState, probs) -> dict:
    probs = np.asarray(probs, np.float64)
    return {"level": int(np.argmax(probs)), "probs": tuple(map(float, probs)), "state": state}


def learned_challenger(
    build: Callable[[int, np.ndarray], Any],
    validate: Callable[[Any], Any],
    key_of: Callable[[Any], int],
    cfg: LearnedConfig,
) -> Challenger:
    """A :class:`Challenger` whose ``generate`` samples the generator and whose ``propose``
    trains it (spec: :func:`learned_spec`).

    ``generate(spec, key)`` samples ``(level, tokens)`` and returns ``build(level,
    tokens[:length])``; each proposal is logged until the next ``propose``. ``propose(spec,
    report)`` scores the logged proposals (:func:`proposal_rewards`: the gain of the report's
    verdict with the proposal's key, the gate, the repeat penalty), takes one policy-gradient
    step and clears the log. A proposal whose verdict comes in a later round than its
    ``propose`` counts 0 (in the reversal study every task is judged within its round), and
    a verdict on a copy generated in an earlier round (``Verdict.round``) credits no proposal
    of this round. ``begin_round``, which ``curriculum_evolve`` calls at the start of each
    round, clears the log too: a round that stopped before its ``propose`` (``on_round``
    raised, say) leaves its proposals logged, and a rerun with the same challenger would train
    on them and penalize its own proposals as their repeats.
    ``checkpoint(spec, directory, step)`` saves the state (:func:`save_learned`). The log of
    proposals since the last ``propose`` is host-side and not saved: it is empty right after
    ``propose``, where ``curriculum_evolve`` checkpoints.

    Args:
      build: ``(level, tokens i32[length]) -> payload``: the family's task.
      validate: the validity gate (raises :class:`InvalidTask`), as :attr:`Challenger.validate`.
      key_of: ``(task) -> int``: a task's content key, for a payload and for a verdict's task
        (leaves as Python lists); equal tasks must get equal keys.
      cfg: the :class:`LearnedConfig`.
    """
    graphdef, _ = init_generator(cfg, jax.random.key(0))
    tx = _optimizer(cfg)
    sample = jax.jit(sample_proposal, static_argnums=(0, 4))
    log: list[tuple[int, np.ndarray, int, bool]] = []

    def generate(spec, key):
        state = spec["state"]
        level, tokens = jax.device_get(
            sample(graphdef, state.params, state.rng, key, cfg.min_length)
        )
        level = int(level)
        payload = build(level, np.asarray(tokens[: cfg.min_length + level], np.int32))
        try:
            validate(payload)
            ok = True
        except InvalidTask:
            ok = False
        log.append((level, np.asarray(tokens, np.int32), int(key_of(payload)) if ok else 0, ok))
        return payload

    @jax.jit
    def update(state, levels, tokens, keys, gain, judged, valid, mask):
        repeat = repeated(keys, mask & valid, state.recent, state.recent_mask)
        reward = proposal_rewards(
            gain,
            judged,
            valid,
            repeat,
            repeat_penalty=cfg.repeat_penalty,
            invalid_reward=cfg.invalid_reward,
        )
        adv = grpo_advantages(reward[None], mask[None], scale_by_std=cfg.scale_by_std)[0]

        def loss(params):
            lp, ent = log_probs(graphdef, params, levels, tokens, cfg.min_length)
            n = jnp.maximum(mask.sum(), 1)
            return (
                -jnp.sum(jnp.where(mask, adv * lp, 0.0))
                - cfg.entropy * jnp.sum(jnp.where(mask, ent, 0.0))
            ) / n

        grads = jax.grad(loss)(state.params)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        recent, recent_mask, cursor = state.recent, state.recent_mask, state.cursor
        if cfg.memory:  # memory 0: a ring of one slot that stays empty
            recent, recent_mask, cursor = remember(recent, recent_mask, cursor, keys, mask & valid)
        rng = jax.random.key_data(jax.random.split(jax.random.wrap_key_data(state.rng))[0])
        new = state.replace(
            params=params,
            opt_state=opt_state,
            rng=rng,
            recent=recent,
            recent_mask=recent_mask,
            cursor=cursor,
            updates=state.updates + 1,
            proposals=state.proposals + mask.sum(dtype=jnp.int32),
            invalid=state.invalid + (mask & ~valid).sum(dtype=jnp.int32),
            repeats=state.repeats + repeat.sum(dtype=jnp.int32),
        )
        return new, reward, _level_probs(graphdef, params)

    def propose(spec, report):
        entries = list(log)
        log.clear()
        if not entries:
            return spec
        # Only verdicts on tasks this round generated: a verdict on an earlier round's copy of
        # a task (its own proposal long credited 0) says nothing about this round's proposal,
        # which the runner rejected as already on the frontier. Round None: a hand-built report.
        verdicts = {
            int(key_of(v.task)): float(v.gain)
            for v in report.judged
            if v.round is None or v.round == report.round
        }
        n = len(entries)
        p = -(-n // _BUCKET) * _BUCKET
        levels = np.zeros(p, np.int32)
        tokens = np.zeros((p, cfg.max_length), np.int32)
        keys = np.zeros(p, np.uint32)
        gain = np.zeros(p, np.float32)
        judged = np.zeros(p, bool)
        valid = np.zeros(p, bool)
        mask = np.zeros(p, bool)
        credited: set[int] = set()
        for i, (level, toks, k, ok) in enumerate(entries):
            levels[i], tokens[i], keys[i], valid[i], mask[i] = level, toks, np.uint32(k), ok, True
            # The runner inserts only the first of equal proposals; only it can be judged.
            if ok and k in verdicts and k not in credited:
                gain[i], judged[i] = verdicts[k], True
                credited.add(k)
        state, _, probs = update(spec["state"], levels, tokens, keys, gain, judged, valid, mask)
        return _spec(state, jax.device_get(probs))

    def checkpoint(spec, directory, step):
        save_learned(directory, step, spec)

    def begin_round(spec, round):
        del spec, round
        log.clear()  # empty unless the last round stopped before its propose

    return Challenger(generate, validate, propose, checkpoint=checkpoint, begin_round=begin_round)


def save_learned(directory: str | os.PathLike, step: int, spec: dict) -> None:
    """Saves a learned challenger's spec as checkpoint ``step`` of ``directory`` (Orbax, via
    :class:`curriculax.checkpoint.CheckpointStore`); waits for the save."""
    from curriculax.checkpoint import CheckpointStore

    store = CheckpointStore(directory)
    try:
        store.save(
            step,
            # host copies: the same values on every process, saved once (Orbax saves a numpy
            # leaf from the primary process), where a process's own device array is not a
            # global array Orbax can save across processes
            jax.device_get(spec["state"].as_dict()),
            {"level": spec["level"], "probs": list(spec["probs"]), "kind": "learned challenger"},
        )
    finally:
        store.close()


def restore_learned(
    directory: str | os.PathLike, cfg: LearnedConfig, step: int | None = None
) -> dict:
    """The learned challenger's spec saved as checkpoint ``step`` (default: the latest) of
    ``directory`` (a run directory's ``challenger/``), for a challenger built with ``cfg``.

    Raises:
      FileNotFoundError: no checkpoint there.
    """
    from curriculax.checkpoint import CheckpointStore

    if not os.path.isdir(directory):
        raise FileNotFoundError(f"no learned-challenger checkpoint in {directory}")
    store = CheckpointStore(directory)
    try:
        step = store.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no learned-challenger checkpoint in {directory}")
        like = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(np.shape(x), x.dtype),
            learned_spec(cfg)["state"].as_dict(),
        )
        saved = store.restore(step, like)
        meta = store.meta(step)
    finally:
        store.close()
    return _spec(LearnedState(**saved), meta["probs"])
