"""The compiled core of the training loop: one function per generation batch, one per update.

``generate`` mixes (picks an env), samples tasks from that env's curriculum, rolls them out,
computes credit, lets the curriculum observe and vote, and appends the admitted groups to a
fixed-capacity pending batch. ``train`` takes exactly ``batch_groups`` groups from the pending
batch and runs one solver update; the surplus waits. Both are pure functions of an
:class:`EngineState` (plus the task pools, passed as arguments, not baked in as constants),
so a run is a deterministic function of its seed, and resuming from a checkpoint continues
exactly as the uninterrupted run would have.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from curriculax import _counters
from curriculax._checks import check_seed, check_unique, int_at_least
from curriculax._curriculum import sanitize
from curriculax._random import seed_key
from curriculax._types import CurriculumState, GroupResults, TaskDraw
from curriculax.credit import finite_rewards
from curriculax.engine import _mesh, _mixer, _pending
from curriculax.engine._env import Env, key_words
from curriculax.engine._mixer import MixerState
from curriculax.engine._pending import PendingBatch
from curriculax.engine._solver import Rollouts, Solver, TrainBatch

STALL_POLICIES = ("raise", "warn")
# The engine's own ``batch/<name>`` metrics; ``batch/<env>`` holds each env's share of a batch,
# so an env may not take one of these names.
BATCH_METRICS = ("reward_mean", "admission_rate", "finalized_groups")


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    """Static settings of the engine.

    Attributes:
      batch_groups: groups per update (``B``); every update trains on exactly this many.
      groups_per_generation: groups rolled out per generation batch (``G``); default ``B``.
      pending_capacity: rows of the pending batch; default ``B + G``. Must hold
        ``B - 1 + G`` rows, the most that can wait after a generation batch.
      stall_windows: consecutive no-progress windows (a batch-equivalent, ``B`` finalized
        groups, with no admitted group) before the guard fires. The guard also waits for at
        least two generation batches in a row without an admitted group, so that with
        ``G >= stall_windows * B`` one unlucky batch does not stop the run.
      stall_policy: ``"raise"`` stops with :class:`CurriculumStalled`; ``"warn"`` logs and
        keeps going.
      seed: seed of the engine's key (mixing, sampling, rollouts, updates); an int in
        ``[-2**63, 2**63)``, each its own key (``curriculax._random.seed_key``: a seed in
        ``[0, 2**32)`` keeps the key ``jax.random.key`` gives it; a negative seed's key
        changed on 2026-12-07, it had shared that of ``seed % 2**32``).

    Integer settings are stored as Python ints (a numpy integer given is converted), so the
    config saves as JSON with a checkpoint.
    """

    batch_groups: int = 16
    groups_per_generation: int | None = None
    pending_capacity: int | None = None
    stall_windows: int = 10
    stall_policy: str = "raise"
    seed: int = 0

    def __post_init__(self):
        for name in ("batch_groups", "groups_per_generation", "pending_capacity", "stall_windows"):
            value = getattr(self, name)
            if value is None and name in ("groups_per_generation", "pending_capacity"):
                continue
            # The validated Python int: a numpy integer kept as it is would not save as JSON.
            object.__setattr__(self, name, int_at_least(value, name))
        object.__setattr__(self, "seed", check_seed(self.seed))
        if self.stall_policy not in STALL_POLICIES:
            raise ValueError(
                f"stall_policy must be one of {STALL_POLICIES}, got {self.stall_policy!r}"
            )
        g = self.generation
        need = self.batch_groups - 1 + g
        if self.capacity < self.batch_groups:
            raise ValueError(
                f"pending_capacity={self.capacity} is smaller than one update "
                f"(batch_groups={self.batch_groups}); it must be at least {need}"
            )
        if self.capacity < need:
            raise ValueError(
                f"pending_capacity={self.capacity} cannot hold the groups that may wait after a "
                f"generation batch: batch_groups - 1 + groups_per_generation = {need}"
            )

    @property
    def generation(self) -> int:
        """Groups per generation batch (``G``)."""
        return self.groups_per_generation or self.batch_groups

    @property
    def capacity(self) -> int:
        """Rows of the pending batch."""
        return self.pending_capacity or self.batch_groups + self.generation


class Counters(NamedTuple):
    """Run counters (all ``i32[]``)."""

    updates: jax.Array
    generations: jax.Array
    groups: jax.Array
    rollouts: jax.Array
    admitted: jax.Array
    since_progress: jax.Array  # groups finalized (all envs) since the last admitted group
    groups_at_update: jax.Array  # `groups` when the last update ran
    admitted_at_update: jax.Array  # `admitted` when the last update ran


class EngineState(NamedTuple):
    """Everything a run carries and checkpoints.

    Attributes:
      solver: the solver's state (params, optimiser state, ...).
      curricula: ``{env: CurriculumState}`` (checkpointed as ``<env>/sampler``,
        ``<env>/gates/<name>``).
      mixer: :class:`MixerState`.
      pending: admitted groups waiting for an update (:class:`PendingBatch`).
      key: ``u32[2]`` raw key data of the engine's PRNG key.
      counters: :class:`Counters`.
      since_progress_by_env: ``i32[E]`` groups of each env finalized since the last admitted
        group of any env (``counters.since_progress`` is the ``i32[]`` total). Named
        ``since_progress`` in checkpoints written before 2026-12-01; those still restore.
    """

    solver: Any
    curricula: dict[str, CurriculumState]
    mixer: MixerState
    pending: PendingBatch
    key: jax.Array
    counters: Counters
    since_progress_by_env: jax.Array


class Generation(NamedTuple):
    """What one generation batch did (for traces, logs and the guard). Leading axis ``G``.

    Attributes:
      env: ``i32[]`` env index of the batch.
      task_ids: ``i32[G]``.
      task_keys: ``u32[G, 2]`` stable 64-bit keys of the tasks as (high, low) words.
      rewards: ``f32[G, K]`` raw rewards (``K`` = the run's largest group size).
      valid: ``bool[G, K]`` after non-finite values were made invalid.
      admitted: ``bool[G]``.
      votes: ``{"<env>/<gate>": bool[G]}`` each gate's vote (True for other envs' gates).
      pending: ``i32[]`` pending rows after the append.
      since_progress: ``i32[]`` groups finalized since the last admitted group.
      generation: ``i32[]`` index of this generation batch (0-based).
      updates: ``i32[]`` updates done before this batch.
      dropped: ``i32[]`` admitted groups of this batch that found no room in the pending
        batch and were lost; always 0 under :func:`~curriculax.engine.run` (see
        :meth:`Engine.generate`).
    """

    env: jax.Array
    task_ids: jax.Array
    task_keys: jax.Array
    rewards: jax.Array
    valid: jax.Array
    admitted: jax.Array
    votes: dict[str, jax.Array]
    pending: jax.Array
    since_progress: jax.Array
    generation: jax.Array
    updates: jax.Array
    dropped: jax.Array


class StepReport(NamedTuple):
    """What :meth:`Engine.step` did.

    Attributes:
      generation: the :class:`Generation` report.
      updates: ``i32[]`` updates run in this step.
      metrics: the last update's metrics (zeros when ``updates == 0``).
    """

    generation: Generation
    updates: jax.Array
    metrics: dict[str, jax.Array]


def _check_envs(envs: Sequence[Env]) -> tuple[Env, ...]:
    if isinstance(envs, Env):
        envs = (envs,)
    envs = tuple(envs)
    if not envs:
        raise ValueError("the engine needs at least one Env")
    for e in envs:
        if not isinstance(e, Env):
            raise TypeError(f"envs must be curriculax.engine.Env values, got {type(e).__name__}")
    check_unique([e.name for e in envs], "env names")
    for e in envs:
        if e.name in BATCH_METRICS:
            raise ValueError(
                f"env name {e.name!r} is taken by the engine's metric 'batch/{e.name}' (each "
                f"env's batch share is logged as 'batch/<env>'); rename the env (reserved: "
                f"{list(BATCH_METRICS)})"
            )
    if not any(e.weight > 0 for e in envs):
        raise ValueError(
            f"at least one env needs a positive weight, got {[(e.name, e.weight) for e in envs]}"
        )
    return envs


def _check_rollout_leading_axes(env: Env, rollouts: Rollouts, groups: int) -> None:
    """Rollouts of ``groups`` groups of exactly ``env.group_size`` (at trace time): a rollout
    function that ignores the group size it is handed would otherwise be padded up silently
    (and charged ``group_size`` rollouts per group) or fail later with an unrelated error."""
    k = env.group_size
    expected = {
        "rewards": ((groups, k), f"(G={groups}, group_size={k})"),
        "valid": ((groups, k), f"(G={groups}, group_size={k})"),
        "token_mask": ((groups, k), f"(G={groups}, group_size={k}, T)"),
    }
    for name, (lead, wanted) in expected.items():
        shape = tuple(np.shape(getattr(rollouts, name)))
        ok = shape[:2] == lead and len(shape) == (3 if name == "token_mask" else 2)
        if not ok:
            raise ValueError(
                f"env {env.name!r}: rollout returned {name} of shape {shape}, expected "
                f"{wanted}: the rollout function must return group_size={k} rollouts for each "
                f"of the {groups} tasks it is handed (it is called with group_size={k})"
            )


class Engine:
    """The compiled training-loop core for a solver and a set of envs.

    Build it once; it compiles ``generate`` and ``train`` on first use and never again (the
    task pools are arguments, not constants, and :meth:`init` places a fresh state as a
    restored one is placed, so resuming in the same process reuses the compiled code; a state
    of your own placed otherwise may compile them once more). Use
    :func:`curriculax.engine.run` for the full loop with logging, traces, checkpoints and the
    no-progress guard, or drive ``init``/``generate``/``train`` yourself.

    Args:
      solver: the :class:`~curriculax.engine.Solver`.
      envs: one or more :class:`~curriculax.engine.Env`.
      config: :class:`EngineConfig`.
      mesh: optional 1-D device mesh (see :func:`curriculax.engine.make_mesh`): rollouts,
        credit and updates run data-parallel along the group axis, the state is replicated,
        except the per-task curriculum state of envs with ``shard_tasks=True``, which is
        split along the axis.
      axis: the mesh axis name.

    Raises:
      ValueError: at construction, for settings that cannot work, with what to change:
        duplicate env names, an env named like an engine metric (``batch/<env>`` would
        collide: :data:`BATCH_METRICS`), no positive weight, a pending batch too small,
        a rollout whose ``rewards``/``valid``/``token_mask`` are not ``[G, group_size, ...]``
        (the env's group size, not another), rollouts whose shapes differ between envs, or a
        group size of 1 with a gate that would then reject every group (e.g. zero-advantage
        rejection under group-relative credit).
    """

    def __init__(
        self,
        solver: Solver,
        envs: Sequence[Env] | Env,
        config: EngineConfig,
        *,
        mesh: Mesh | None = None,
        axis: str = _mesh.AXIS,
    ):
        if not isinstance(solver, Solver):
            raise TypeError(f"solver must be a curriculax.engine.Solver, got {type(solver)}")
        if not isinstance(config, EngineConfig):
            raise TypeError(f"config must be an EngineConfig, got {type(config).__name__}")
        self.solver = solver
        self.envs = _check_envs(envs)
        self.config = config
        self.env_names = tuple(e.name for e in self.envs)
        self.weights = np.array([e.weight for e in self.envs], np.float64)
        self.max_group_size = max(e.group_size for e in self.envs)
        self.vote_names = tuple(f"{e.name}/{g}" for e in self.envs for g in e.curriculum.gates)
        self.pools = {e.name: e.tasks for e in self.envs}
        self.pool_keys = {e.name: jnp.asarray(key_words(e.keys)) for e in self.envs}
        self.curricula = {e.name: e.curriculum for e in self.envs}
        self.mesh, self.axis = mesh, axis
        self._check_rollout_shapes()
        self._check_group_size_one()
        self.state_sharding = None
        if mesh is None:
            if any(e.shard_tasks for e in self.envs):
                raise ValueError("Env(shard_tasks=True) needs a device mesh: Engine(..., mesh=...)")
            self._generate = jax.jit(self._generate_impl, donate_argnums=0)
            self._train = jax.jit(self._train_impl, donate_argnums=0)
            self._init = jax.jit(self._init_impl)
        else:
            self._setup_mesh(mesh, axis)

    def _setup_mesh(self, mesh: Mesh, axis: str) -> None:
        """Data parallelism over the mesh; per-task state of ``shard_tasks`` envs split."""
        if axis not in mesh.shape:
            raise ValueError(f"mesh has axes {tuple(mesh.shape)}, not {axis!r}")
        d = mesh.shape[axis]
        g, b = self.config.generation, self.config.batch_groups
        for name, value in (("groups_per_generation", g), ("batch_groups", b)):
            if value % d:
                raise ValueError(
                    f"{name}={value} must be a multiple of the {d} devices of mesh axis {axis!r}"
                )
        abstract = jax.eval_shape(self._init_impl, jax.random.key(0))
        specs = jax.tree.map(lambda _: P(), abstract)
        curricula_specs = dict(specs.curricula)
        for e in self.envs:
            if not e.shard_tasks:
                continue
            if e.num_tasks % d:
                raise ValueError(
                    f"env {e.name!r}: shard_tasks needs a pool size divisible by the {d} devices, "
                    f"got {e.num_tasks}"
                )
            env_specs = _mesh.per_task_specs(abstract.curricula[e.name], axis)
            if not _mesh.has_per_task_fields(env_specs):
                raise ValueError(
                    f"env {e.name!r}: shard_tasks=True but its curriculum state declares no "
                    "per-task fields (PER_TASK); nothing to split"
                )
            curricula_specs[e.name] = env_specs
            self.curricula[e.name] = _mesh.shard_curriculum(e.curriculum, mesh, axis, env_specs)
        specs = specs._replace(curricula=curricula_specs)
        self.state_sharding = _mesh.shardings(specs, mesh)
        replicated = NamedSharding(mesh, P())
        # From host copies: on a mesh over several processes, device_put of an array already
        # on one device makes an array with the wrong shards (jax 0.10-0.12), which the first
        # checkpoint save then fails on.
        self.pools = jax.device_put(jax.device_get(self.pools), replicated)
        self.pool_keys = jax.device_put(jax.device_get(self.pool_keys), replicated)
        self._generate = jax.jit(
            self._generate_impl,
            donate_argnums=0,
            in_shardings=(self.state_sharding, replicated, replicated),
            out_shardings=(self.state_sharding, replicated),
        )
        self._train = jax.jit(
            self._train_impl,
            donate_argnums=0,
            in_shardings=(self.state_sharding,),
            out_shardings=(self.state_sharding, replicated),
        )
        self._init = jax.jit(self._init_impl, out_shardings=self.state_sharding)

    # ----------------------------------------------------------------- construction checks
    def _rollout_fn(self, env: Env):
        return env.rollout if env.rollout is not None else self.solver.rollout

    def _resolve(self, pool, pool_keys, drawn):
        """Task rows for a sampler's draw: pool lookups for ids, payloads as they are."""
        if not isinstance(drawn, TaskDraw):
            ids = jnp.asarray(drawn).astype(jnp.int32)
            return ids, jax.tree.map(lambda x: x[ids], pool), pool_keys[ids]
        n = pool_keys.shape[0]
        ids = drawn.ids.astype(jnp.int32)
        at = jnp.clip(ids, 0, n - 1)
        use = drawn.from_pool

        def pick(x, payload):
            mask = use.reshape((-1,) + (1,) * (x.ndim - 1))
            return jnp.where(mask, x[at], payload.astype(x.dtype))

        tasks = jax.tree.map(pick, pool, drawn.tasks)
        # A payload's own key is 32 bits (the frontier's): its high word is 0.
        payload_keys = jnp.stack(
            [jnp.zeros_like(drawn.keys, jnp.uint32), drawn.keys.astype(jnp.uint32)], axis=-1
        )
        keys = jnp.where(use[:, None], pool_keys[at], payload_keys)
        return ids, tasks, keys

    def _env_rows(self, i: int, solver_state, tasks, ids, key):
        """Rolls out tasks ``ids`` of env ``i``: raw results and padded training rows."""
        env = self.envs[i]
        if self.mesh is not None:  # split the groups over the devices
            tasks = _mesh.constrain(tasks, self.mesh, P(self.axis))
        rollouts = self._rollout_fn(env)(solver_state, tasks, key, env.group_size)
        if not isinstance(rollouts, Rollouts):
            raise TypeError(
                f"env {env.name!r}: rollout must return curriculax.engine.Rollouts, "
                f"got {type(rollouts).__name__}"
            )
        _check_rollout_leading_axes(env, rollouts, ids.shape[0])
        # Credit sees only finite rewards (the raw rewards still go to observe).
        rewards, valid = finite_rewards(rollouts.rewards, rollouts.valid)
        advantages = self.solver.credit(rollouts._replace(rewards=rewards, valid=valid))
        raw = GroupResults(
            ids,
            rollouts.rewards,
            rollouts.valid,
            advantages,
            rollouts.token_mask,
            None if rollouts.answers is None else jnp.asarray(rollouts.answers, jnp.int32),
        )
        clean, _ = sanitize(raw)
        # Answers go to the curriculum only: the training batch has one structure for every env.
        rollouts = rollouts._replace(rewards=clean.rewards, valid=clean.valid, answers=None)
        rollouts, advantages = _pending.pad_group_axis(
            rollouts, clean.advantages, self.max_group_size
        )
        env_ids = jnp.full(ids.shape, i, jnp.int32)
        return raw, TrainBatch(rollouts, advantages, env_ids, ids)

    def _check_rollout_shapes(self) -> None:
        g = self.config.generation
        key = jax.random.key(0)
        solver_state = jax.eval_shape(self.solver.init, key)
        layouts = []
        for i, env in enumerate(self.envs):

            def probe(s, pool, i=i):
                ids = jnp.zeros((g,), jnp.int32)
                tasks = jax.tree.map(lambda x: x[ids], pool)
                return self._env_rows(i, s, tasks, ids, key)[1]

            rows = jax.eval_shape(probe, solver_state, self.pools[env.name])
            layouts.append(rows)
            if i == 0:  # the pending batch's row layout (the same for every env, checked below)
                self._row_shapes = rows
            for name in ("rewards", "valid"):
                shape = getattr(rows.rollouts, name).shape
                if shape != (g, self.max_group_size):
                    raise ValueError(
                        f"env {env.name!r}: rollout {name} has shape {shape}, expected "
                        f"[G={g}, K={self.max_group_size}] (after padding K={env.group_size})"
                    )
        first = layouts[0]
        flat0 = jax.tree_util.tree_flatten_with_path(first)
        for env, rows in zip(self.envs[1:], layouts[1:]):
            flat = jax.tree_util.tree_flatten_with_path(rows)
            if flat0[1] != flat[1]:
                raise ValueError(
                    f"env {env.name!r}: rollout data has a different structure from env "
                    f"{self.envs[0].name!r}: {flat[1]} vs {flat0[1]}; every env of a run must "
                    "produce the same rollout layout (pad tokens to a common length)"
                )
            for (path, a), (_, b) in zip(flat0[0], flat[0]):
                if a.shape != b.shape or a.dtype != b.dtype:
                    raise ValueError(
                        f"env {env.name!r}: rollout leaf {jax.tree_util.keystr(path)} is "
                        f"{b.dtype}{list(b.shape)} but {a.dtype}{list(a.shape)} in env "
                        f"{self.envs[0].name!r}; every env must produce the same layout"
                    )

    def _check_group_size_one(self) -> None:
        """A group of one under group-relative credit has zero advantage everywhere; a gate
        that rejects zero-advantage groups would then reject every group and the run would
        never fill a batch. Probe the real credit function and gates to find out."""
        for env in self.envs:
            if env.group_size != 1 or not env.curriculum.gates:
                continue
            key = jax.random.key(0)
            solver_state = jax.eval_shape(self.solver.init, key)
            ids = jnp.zeros((2,), jnp.int32)
            # Two rows even from a one-task pool.
            tasks = jax.tree.map(lambda x, ids=ids: x[ids], self.pools[env.name])
            shapes = jax.eval_shape(
                lambda s, t, k, env=env: self._rollout_fn(env)(s, t, k, 1), solver_state, tasks, key
            )
            probe = Rollouts(
                rewards=jnp.array([[0.25], [1.0]], jnp.float32),
                valid=jnp.ones((2, 1), bool),
                token_mask=jnp.ones(shapes.token_mask.shape, bool),
                data=jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes.data),
                answers=None if shapes.answers is None else jnp.arange(2)[:, None],
            )
            adv = self.solver.credit(probe)
            results = GroupResults(
                ids, probe.rewards, probe.valid, adv, probe.token_mask, probe.answers
            )
            admission, _ = env.curriculum.observe(env.curriculum.init(key), results)
            if not bool(jnp.any(admission.admitted)):
                rejecting = [
                    name for name, vote in admission.by_gate.items() if not bool(jnp.any(vote))
                ]
                raise ValueError(
                    f"env {env.name!r}: group_size=1 with gate(s) {rejecting}: this solver's "
                    "credit gives a single-rollout group zero advantage (group-relative "
                    "credit), so every group would be rejected and no batch could ever fill. "
                    "Use group_size >= 2, or remove the gate for this env."
                )

    # ----------------------------------------------------------------------- pure functions
    def _init_impl(self, key: jax.Array) -> EngineState:
        k_solver, k_cur, k_run = jax.random.split(key, 3)
        solver_state = self.solver.init(k_solver)
        cur_keys = jax.random.split(k_cur, len(self.envs))
        curricula = {e.name: e.curriculum.init(cur_keys[i]) for i, e in enumerate(self.envs)}
        # Shapes only (traced at construction): no rollout runs here, so a rollout with side
        # effects (a host callback, a generation server) runs only for the batches charged.
        example = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), self._row_shapes)
        zero = _counters.zero()
        return EngineState(
            solver=solver_state,
            curricula=curricula,
            mixer=_mixer.init(len(self.envs)),
            pending=_pending.empty(example, self.config.capacity),
            key=jax.random.key_data(k_run),
            counters=Counters(*([zero] * len(Counters._fields))),
            since_progress_by_env=jnp.zeros((len(self.envs),), jnp.int32),
        )

    def init(self, key: jax.Array | None = None) -> EngineState:
        """A fresh run state (``key`` default: ``jax.random.key(config.seed)`` as JAX's 64-bit
        mode builds it, so every seed gets its own key: ``curriculax._random.seed_key``),
        committed to its device(s) like a restored one."""
        if key is None:
            key = seed_key(self.config.seed)
        state = self._init(key)
        leaves = jax.tree.leaves(state)
        if self.mesh is None and not any(isinstance(x, jax.core.Tracer) for x in leaves):
            # Committed to its device (in place, no copy), as a restored state is: ``generate``
            # and ``train`` then compile once for a fresh run and a resumed one alike.
            state = jax.tree.map(lambda x: jax.device_put(x, x.sharding), state)
        return state

    def _generate_impl(self, state: EngineState, pools, pool_keys):
        g = self.config.generation
        key = jax.random.wrap_key_data(state.key)
        key, k_mix, k_sample, k_roll = jax.random.split(key, 4)
        env_index = _mixer.choose(k_mix, self.weights)

        def branch(i):
            env = self.envs[i]

            curriculum = self.curricula[env.name]

            def run(curricula):
                cur = curricula[env.name]
                drawn, cur = curriculum.sample(cur, k_sample, g)
                ids, tasks, keys = self._resolve(pools[env.name], pool_keys[env.name], drawn)
                raw, rows = self._env_rows(i, state.solver, tasks, ids, k_roll)
                admission, cur = curriculum.observe(cur, raw)
                votes = {name: jnp.ones((g,), bool) for name in self.vote_names}
                for gate, vote in admission.by_gate.items():
                    votes[f"{env.name}/{gate}"] = vote
                curricula = {**curricula, env.name: cur}
                rollouts = jnp.int32(env.group_size * g)
                rewards = _pending.pad_k(raw.rewards, self.max_group_size)
                return curricula, rows, admission.admitted, votes, rewards, keys, rollouts

            return run

        branches = [branch(i) for i in range(len(self.envs))]
        if len(branches) == 1:
            out = branches[0](state.curricula)
        else:
            out = jax.lax.switch(env_index, branches, state.curricula)
        curricula, rows, admitted, votes, raw_rewards, task_keys, rollouts = out
        num_admitted = jnp.sum(admitted, dtype=jnp.int32)
        # Only a caller that generates again before training overfills the buffer (see generate).
        dropped = jnp.maximum(state.pending.count + num_admitted - self.config.capacity, 0)
        pending = _pending.append(state.pending, rows, admitted)
        progress = num_admitted > 0
        c = state.counters
        since = jnp.where(progress, 0, _counters.add(c.since_progress, g))
        hit = (jnp.arange(len(self.envs)) == env_index).astype(jnp.int32) * g
        since_env = jnp.where(progress, 0, _counters.add(state.since_progress_by_env, hit))
        counters = c._replace(
            generations=_counters.add(c.generations, 1),
            groups=_counters.add(c.groups, g),
            rollouts=_counters.add(c.rollouts, rollouts),
            admitted=_counters.add(c.admitted, num_admitted),
            since_progress=since,
        )
        new_state = EngineState(
            solver=state.solver,
            curricula=curricula,
            mixer=_mixer.record(state.mixer, env_index, g),
            pending=pending,
            key=jax.random.key_data(key),
            counters=counters,
            since_progress_by_env=since_env,
        )
        report = Generation(
            env=env_index,
            task_ids=rows.task_ids,
            task_keys=task_keys,
            rewards=raw_rewards,
            valid=rows.rollouts.valid,
            admitted=admitted,
            votes=votes,
            pending=pending.count,
            since_progress=since,
            generation=c.generations,
            updates=c.updates,
            dropped=dropped.astype(jnp.int32),
        )
        return new_state, report

    def generate(self, state: EngineState) -> tuple[EngineState, Generation]:
        """Rolls out one generation batch and appends its admitted groups. ``state`` is donated.

        The pending batch holds ``B - 1 + G`` rows or more (``EngineConfig.pending_capacity``):
        room for one generation batch on top of what an update leaves. So call :meth:`train`
        while ``state.pending.count >= batch_groups`` before generating again, as
        :func:`~curriculax.engine.run` and :meth:`step` do. Admitted groups that find no room
        are dropped (the latest first); ``Generation.dropped`` counts them (``counters.admitted``
        still counts every group the gates admitted).
        """
        return self._generate(state, self.pools, self.pool_keys)

    def _train_impl(self, state: EngineState):
        b = self.config.batch_groups
        batch, pending = _pending.take(state.pending, b)
        batch = _mesh.constrain(batch, self.mesh, P(self.axis))  # data-parallel update
        key = jax.random.wrap_key_data(state.key)
        key, k_update = jax.random.split(key)
        solver_state, solver_metrics = self.solver.update(state.solver, batch, k_update)
        c = state.counters
        counters = c._replace(
            updates=_counters.add(c.updates, 1),
            groups_at_update=c.groups,
            admitted_at_update=c.admitted,
        )
        new_state = state._replace(
            solver=solver_state, pending=pending, key=jax.random.key_data(key), counters=counters
        )
        metrics = {f"solver/{k}": jnp.asarray(v, jnp.float32) for k, v in solver_metrics.items()}
        valid = batch.rollouts.valid
        metrics["batch/reward_mean"] = jnp.sum(
            jnp.where(valid, batch.rollouts.rewards, 0.0)
        ) / jnp.maximum(jnp.sum(valid), 1)
        finalized = (c.groups - c.groups_at_update).astype(jnp.float32)
        # No group finalized since the last update (a second update from one generation batch
        # when G > B): the rate is undefined, NaN, not 0 (nothing was rejected).
        admitted = (c.admitted - c.admitted_at_update).astype(jnp.float32)
        metrics["batch/admission_rate"] = jnp.where(
            finalized > 0, admitted / jnp.maximum(finalized, 1.0), jnp.nan
        )
        metrics["batch/finalized_groups"] = finalized
        for i, name in enumerate(self.env_names):
            metrics[f"batch/{name}"] = jnp.mean((batch.env == i).astype(jnp.float32))
        metrics.update(self._curriculum_metrics(new_state))
        return new_state, metrics

    def _curriculum_metrics(self, state: EngineState) -> dict[str, jax.Array]:
        out = {}
        for i, env in enumerate(self.envs):
            for k, v in self.curricula[env.name].metrics(state.curricula[env.name]).items():
                out[f"curriculum/{env.name}/{k}"] = jnp.asarray(v, jnp.float32)
            out[f"mix/{env.name}/groups"] = state.mixer.groups[i].astype(jnp.float32)
        return out

    def train(self, state: EngineState) -> tuple[EngineState, dict[str, jax.Array]]:
        """One update on exactly ``batch_groups`` pending groups (the caller checked there are
        enough). ``state`` is donated. Returns the metrics of this update.

        Beside the solver's (``solver/<name>``) and the curricula's: ``batch/reward_mean``;
        ``batch/finalized_groups``, the groups finalized since the previous update;
        ``batch/admission_rate``, the share of those admitted, NaN when there were none (the
        further updates one generation batch allows when ``G > B``); ``batch/<env>``, each
        env's share of the batch.
        """
        return self._train(state)

    def step(self, state: EngineState) -> tuple[EngineState, StepReport]:
        """One generation batch, then every update the pending batch allows, as one pure
        function (not jitted, nothing donated): for ``lax.scan`` over steps and ``vmap`` over
        seeds, e.g. to run several seeds of a comparison as one program at an equal budget of
        rollouts. ``metrics`` are the last update's (zeros when none ran).

        A state that already holds ``batch_groups`` pending groups or more (as :func:`run` can
        leave one when ``G > B``) is trained down first, by the same updates, so that the
        generation batch finds room; ``updates`` and ``metrics`` count those too. From a state
        ``step`` returned (or ``init``'s) there is nothing to train first."""
        template = jax.eval_shape(self._train_impl, state)[1]
        zeros = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), template)
        carry = self._train_while_ready((state, jnp.zeros((), jnp.int32), zeros))
        state, gen = self._generate_impl(carry[0], self.pools, self.pool_keys)
        state, updates, metrics = self._train_while_ready((state, *carry[1:]))
        return state, StepReport(gen, updates, metrics)

    def _train_while_ready(self, carry):
        """``(state, updates, metrics)`` after an update on every full batch pending."""
        b = self.config.batch_groups

        def train(carry):
            s, n, _ = carry
            s, metrics = self._train_impl(s)
            return s, n + 1, metrics

        return jax.lax.while_loop(lambda c: c[0].pending.count >= b, train, carry)

    @property
    def tasks_per_env(self) -> dict[str, int]:
        return {e.name: e.num_tasks for e in self.envs}
