"""``curriculum_evolve``: train a solver while a challenger keeps proposing frontier tasks."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from curriculax._checks import check_unique_keys, int_at_least
from curriculax._config import sampler_from_config
from curriculax._curriculum import curriculum
from curriculax._files import write_json_atomic
from curriculax._random import seed_key
from curriculax._types import AdmissionGate, TaskSampler
from curriculax.engine._engine import Engine, EngineConfig, EngineState
from curriculax.engine._env import Env, task_keys
from curriculax.engine._logging import JsonlWriter
from curriculax.engine._loop import run
from curriculax.engine._solver import Solver
from curriculax.selfplay._challenger import Challenger, conform_pool, run_challenge
from curriculax.selfplay._frontier import EMPTY, check_frontier_draws, frontier_sampler
from curriculax.tasks._keys import held_out_mask


class Verdict(NamedTuple):
    """The judge's verdict on one generated task (in :attr:`RoundReport.judged`).

    Attributes:
      task: the task's payload as the frontier stored it, leaves as Python lists/scalars
        (so reports compare with ``==`` and a challenger can read e.g. its level).
      gain: (latest - baseline) pass rate.
      learned: whether it was judged learned (else stuck).
      round: the round whose challenge generated the task (a task not judged within its
        round is judged in a later one); ``None``: not known (a hand-built report).
    """

    task: Any
    gain: float
    learned: bool
    round: int | None = None


@dataclasses.dataclass(frozen=True)
class RoundReport:
    """What one round of self-play did on the training side: the report ``propose`` tunes
    the spec from. It holds no held-out score, by construction: the held-out evaluation goes
    to the run's records only (:attr:`EvolutionResult.held_out`, ``on_round``, the run
    directory's ``metrics.jsonl`` and ``summary.json``).

    Attributes:
      round: 0-based round index.
      spec: the spec the challenger generated with this round.
      generated: valid tasks generated (and inserted, up to the frontier's free slots).
      invalid: payloads rejected by the validity gate (or malformed).
      collisions: generated tasks rejected because they equal a held-out task.
      learned: frontier tasks judged learned this round.
      stuck: frontier tasks judged stuck this round.
      dropped_easy: frontier tasks dropped this round because the solver already passed them.
      r0: mean (latest - baseline) pass rate over the tasks judged this round.
      occupancy: tasks left on the frontier after judging.
      steps: updates done so far.
      rollouts: solver rollouts so far.
      metrics: the round's last update metrics (``solver/...``, ``batch/...``,
        ``curriculum/...``; training-side only, no wall time, so a report is a deterministic
        function of the seed).
      judged: one :class:`Verdict` per task judged this round (in slot order), so a
        challenger can credit its verdicts to what generated them (e.g. a level); tasks
        dropped as easy are only counted. Not part of :attr:`EvolutionResult.history`.
    """

    round: int
    spec: Any
    generated: int
    invalid: int
    collisions: int
    learned: int
    stuck: int
    dropped_easy: int
    r0: float
    occupancy: int
    steps: int
    rollouts: int
    metrics: dict = dataclasses.field(default_factory=dict)
    judged: tuple[Verdict, ...] = ()


@dataclasses.dataclass(frozen=True)
class EvolutionResult:
    """What :func:`curriculum_evolve` returns.

    Attributes:
      final_reward: mean held-out score at the end (held-out tasks only).
      history: one dict per round: the :class:`RoundReport` fields but ``judged``, plus
        ``held_out_reward``. The values are the report's as they are: numbers and the
        ``metrics`` dict, but ``spec`` as the challenger holds it (e.g. jax arrays for a pure
        bandit's spec, a ``LearnedState`` of arrays in the learned challenger's), so it is
        JSON-able only when the spec is; ``summary.json`` writes what is not with ``str``.
      curriculum: the per-round :class:`RoundReport` values (what ``propose`` saw).
      held_out: the mean held-out score after each round (what ``propose`` never saw).
      state: the final engine state.
      engine: the engine (one instance for the whole run).
      spec: the challenger's spec after the last ``propose``; without a challenger, the
        ``spec`` passed in, unchanged (``None`` by default).
    """

    final_reward: float
    history: list[dict]
    curriculum: tuple[RoundReport, ...]
    held_out: tuple[float, ...]
    state: EngineState
    engine: Engine
    spec: Any = None


def check_round_counts(rounds, steps_per_round, generated_per_round, challenger) -> None:
    """Raises a ValueError naming the count that is not an int >= 1 (``generated_per_round``
    only with a challenger): the host and compiled runners' shared argument check."""
    counts = [("rounds", rounds), ("steps_per_round", steps_per_round)]
    if challenger is not None:
        counts.append(("generated_per_round", generated_per_round))
    for name, value in counts:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")


def _num_rows(tasks: Any) -> int:
    """Rows of a task pytree (its first leaf's leading axis; 0 without a leaf)."""
    leaves = jax.tree.leaves(tasks)
    return int(np.shape(leaves[0])[0]) if leaves and np.ndim(leaves[0]) else 0


def _take(tasks: Any, idx: np.ndarray) -> Any:
    return jax.tree.map(lambda x: jnp.asarray(np.asarray(x)[idx]), tasks)


def _verdicts(fstate: Any, rep: Any) -> tuple[Verdict, ...]:
    """The judged slots' payloads, verdicts and rounds, as Python values (one device read)."""
    tasks, rounds, mask, learned, gain = jax.device_get(
        (fstate.tasks, fstate.spec, rep.judged_mask, rep.learned_mask, rep.gain)
    )
    return tuple(
        Verdict(
            jax.tree.map(lambda x, i=i: x[i].tolist(), tasks),
            float(gain[i]),
            bool(learned[i]),
            int(rounds[i]),
        )
        for i in np.flatnonzero(mask)
    )


def _build_sampler(sampler: Any, num_tasks: int) -> TaskSampler:
    if sampler is None:
        sampler = {"type": "difficulty_pools"}
    if isinstance(sampler, TaskSampler):
        return sampler
    if isinstance(sampler, Mapping):
        return sampler_from_config(sampler, num_tasks)
    if callable(sampler):
        return sampler(num_tasks)
    raise TypeError(
        "sampler must be a TaskSampler, a config mapping, or a factory num_tasks -> TaskSampler"
    )


def curriculum_evolve(
    solver: Solver,
    seed_tasks: Any,
    *,
    challenger: Challenger | None = None,
    spec: Any = None,
    rounds: int = 5,
    steps_per_round: int = 20,
    generated_per_round: int = 32,
    frontier_share: float = 0.25,
    frontier_capacity: int | None = None,
    max_attempts: int = 4,
    held_out_frac: float | None = None,
    held_out_tasks: Any = None,
    key: jax.Array | int = 0,
    sampler: Any = None,
    gates: Mapping[str, AdmissionGate] | None = None,
    group_size: int = 8,
    batch_groups: int = 16,
    groups_per_generation: int | None = None,
    success_threshold: float = 1.0,
    pass_rate: float = 0.5,
    z: float = 2.0,
    seed_keys: Any = None,
    run_dir: str | os.PathLike | None = None,
    progress: bool = False,
    traces: bool | float = False,
    on_round: Callable[[RoundReport, float], None] | None = None,
    mesh=None,
) -> EvolutionResult:
    """Trains ``solver`` on ``seed_tasks`` while a challenger proposes frontier tasks.

    A round: **challenge** (generate ``generated_per_round`` valid tasks with the current spec;
    invalid payloads are counted; a task equal to one of the round's or to one still on the
    frontier is rejected, so no task sits in two slots), **solve** (train ``steps_per_round``
    updates on seed plus frontier tasks), **judge** (drop learned and stuck frontier tasks;
    r0 = mean(latest - baseline), as :func:`frontier_sampler` explains), **tune** (``spec =
    challenger.propose(spec, report)``). One engine instance runs the whole time: solver and
    optimiser state, curriculum state and the compiled step persist across rounds; nothing
    is rebuilt or recompiled per round.

    Isolation: the held-out set is fixed before round 1, either ``held_out_tasks`` or a split
    of the seed tasks by a stable hash of their keys. The challenger and the sampler never see
    held-out tasks; a generated task equal to a held-out one is rejected and counted. The
    held-out score is measured after each round and goes to the run's records only
    (:attr:`EvolutionResult.held_out`, ``on_round``, ``metrics.jsonl`` and ``summary.json``):
    the :class:`RoundReport` that ``propose`` receives has no held-out field, so a challenger
    cannot tune on the evaluation, and ``final_reward`` stays a held-out estimate.

    Without a challenger this is an ordinary training run (rounds only set the evaluation
    points): self-play is opt-in.

    Args:
      solver: the :class:`~curriculax.engine.Solver`.
      seed_tasks: the seed pool (any pytree of arrays with a leading task axis).
      challenger: the :class:`Challenger`, or ``None``.
      spec: the challenger's initial spec.
      rounds: rounds to run.
      steps_per_round: updates per round.
      generated_per_round: valid tasks to generate per round.
      frontier_share: share of each generation batch drawn from the frontier
        (``round(frontier_share * groups_per_generation)`` groups; a positive share that
        rounds to 0 is refused).
      frontier_capacity: frontier buffer size, >= 1 (default ``4 * generated_per_round``).
      max_attempts: measured attempts after which a frontier task is judged (learned or
        stuck), >= 2.
      held_out_frac: share of seed tasks held out for evaluation, in [0, 1) (default 0.2; 0
        when ``held_out_tasks`` is given), split by :func:`curriculax.tasks.held_out_mask`
        of the run's keys; a held-out task whose content a training task also holds (two
        copies under distinct ``seed_keys``) is refused.
      held_out_tasks: an explicit evaluation set (the structure and row shapes of
        ``seed_tasks``, else refused; none of its keys may be a seed task's); then every seed
        task trains. Generated tasks, the held-out set and the seed pool are compared as the
        solver trains them: cast ``same_kind`` to the seed pool's dtypes in JAX's precision
        (float64 as float32 unless x64 is on), so a float32 copy of a float64 held-out task
        is a collision.
      key: PRNG key or int seed of the run (a signed 64-bit int; each its own key).
      sampler: the seed sampler: a TaskSampler for the training split, a config mapping
        (``{"type": "difficulty_pools"}``, the default), or ``num_tasks -> TaskSampler``.
      gates: admission gates (default: none). A gate that keeps per-task state indexes it by
        task id, and a frontier task's id is ``N + slot``, reused when the slot takes a new
        task: size such a gate to the seed pool (``N`` training tasks), so frontier ids lie
        past it and nothing of a slot's old task carries over to its new one.
      group_size: rollouts per task (several rollouts per attempt keep learnability honest).
      batch_groups: groups per update.
      groups_per_generation: groups per generation batch (default ``batch_groups``).
      success_threshold: reward counted as a success by the frontier.
      pass_rate: pass rate that counts as passing (first measurement: dropped as easy).
      z: standard errors the latest pass rate must exceed the baseline by to count as learned.
      seed_keys: stable ``u32[N]`` keys of the seed tasks (default: their ``key`` field or a
        content hash).
      run_dir: optional run directory: the engine's ``metrics.jsonl`` (plus one
        ``eval/held_out_reward`` record per round), traces, checkpoints, and ``summary.json``
        (the run's summary plus ``final_reward`` and the per-round ``history``), and the
        challenger's state in ``challenger/`` when it has a ``checkpoint`` (one per round).
      progress: show a progress bar.
      traces: trace groups (as in :func:`curriculax.engine.run`).
      on_round: ``(report, held_out_reward)`` after each round (e.g. to print a table).
      mesh: an optional device mesh for the engine (data-parallel rollouts and updates; see
        :func:`curriculax.engine.make_mesh`).

    Returns:
      An :class:`EvolutionResult`.
    """
    check_round_counts(rounds, steps_per_round, generated_per_round, challenger)
    if challenger is not None and not isinstance(challenger, Challenger):
        raise TypeError(
            f"challenger must be a selfplay.Challenger, got {type(challenger).__name__}"
        )
    if isinstance(key, int):
        key = seed_key(key, "key")  # every int seed its own key (curriculax._random.seed_key)

    # What tasks hold (content or key field), as a generated task is keyed; seed_keys, when
    # given, key the pool for the run and its split instead.
    content = task_keys(seed_tasks)
    keys = content if seed_keys is None else np.asarray(seed_keys, np.uint32)
    if keys.shape != content.shape:  # else the split would drop or misread seed tasks
        raise ValueError(
            f"seed_keys holds {keys.size} keys (shape {keys.shape}) for {len(content)} seed "
            f"tasks; pass one key per seed task, u32[{len(content)}]"
        )
    check_unique_keys(keys, "seed_tasks")
    # The solver trains on the pools in JAX's dtypes (a float64 leaf as float32 unless x64 is
    # on): generated tasks, the held-out set and the seed pool are compared as they train, in
    # that layout (as compiled_evolve compares them), else a float32 copy of a float64
    # held-out task would pass as another task and train. The split keeps the given keys.
    keyed = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(
            np.shape(x)[1:], jax.dtypes.canonicalize_dtype(np.asarray(x).dtype)
        ),
        seed_tasks,
    )
    seed_tasks = conform_pool(seed_tasks, keyed, "seed_tasks")
    trained = task_keys(seed_tasks)
    if held_out_tasks is not None:
        if held_out_frac:
            raise ValueError(
                f"pass either held_out_tasks or held_out_frac (got held_out_frac="
                f"{held_out_frac}): with an explicit held-out set every seed task trains"
            )
        if _num_rows(held_out_tasks) == 0:  # before keying: an empty pool has no rows to hash
            raise ValueError("held_out_tasks is empty")
        # Keyed as a generated task is: cast to the layout above first (the keys hash
        # dtypes, so a float64 copy of a float32 seed task would pass as another task).
        held_out_tasks = conform_pool(held_out_tasks, keyed, "held_out_tasks")
        held_keys = task_keys(held_out_tasks)
        check_unique_keys(held_keys, "held_out_tasks")
        # Compared by what the tasks hold (given seed_keys are another key space).
        shared = np.intersect1d(trained, held_keys)
        if shared.size:
            raise ValueError(
                f"{shared.size} held-out task(s) are also seed tasks (keys {shared[:5].tolist()}"
                "...); the held-out set must be disjoint from the training pool"
            )
        train_tasks, train_keys = seed_tasks, keys
        held_tasks = held_out_tasks
        num_held, forbidden = len(held_keys), held_keys
    else:
        frac = 0.2 if held_out_frac is None else held_out_frac
        # The tasks' split (a function of the key alone): the same with and without a
        # challenger, on every machine, whatever the pool's order. 0 holds nothing out.
        held = np.zeros(len(keys), bool) if frac == 0 else np.asarray(held_out_mask(keys, frac))
        train_idx, held_idx = np.flatnonzero(~held), np.flatnonzero(held)
        if len(train_idx) == 0:
            raise ValueError("every seed task fell in the held-out split; lower held_out_frac")
        if frac > 0 and len(held_idx) == 0:
            raise ValueError(
                f"no seed task fell in the held-out split ({len(keys)} tasks, "
                f"held_out_frac={frac}); add tasks or raise held_out_frac"
            )
        # The split goes by the run's keys; given seed_keys (or float64 rows equal in float32)
        # can put two copies of one task on both sides, so what the tasks hold as trained is
        # compared too (as for held_out_tasks).
        shared = np.intersect1d(trained[train_idx], trained[held_idx])
        if shared.size:
            rows = [
                f"held-out rows {held_idx[trained[held_idx] == k][:4].tolist()} and training "
                f"rows {train_idx[trained[train_idx] == k][:4].tolist()}"
                for k in shared[:3]
            ]
            raise ValueError(
                f"{shared.size} held-out task(s) have a copy in the training split (same "
                f"content as trained, distinct keys): {'; '.join(rows)}; the held-out set must "
                "be disjoint from the training pool: remove the duplicate rows or pass "
                "held_out_tasks"
            )
        train_tasks, train_keys = _take(seed_tasks, train_idx), keys[train_idx]
        held_tasks = _take(seed_tasks, held_idx)
        num_held, forbidden = len(held_idx), trained[held_idx]
    n = len(train_keys)

    inner = _build_sampler(sampler, n)
    frontier = None
    if challenger is not None:
        layout = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), train_tasks)
        frontier = frontier_sampler(
            inner,
            n,
            layout,
            capacity=4 * generated_per_round
            if frontier_capacity is None
            else int_at_least(frontier_capacity, "frontier_capacity"),
            frontier_share=frontier_share,
            max_attempts=max_attempts,
            success_threshold=success_threshold,
            pass_rate=pass_rate,
            z=z,
        )
        if groups_per_generation is None:
            check_frontier_draws(frontier_share, batch_groups, "batch_groups")
        else:
            check_frontier_draws(frontier_share, groups_per_generation, "groups_per_generation")
        cur = curriculum(frontier.sampler, gates)
    else:
        cur = curriculum(inner, gates)
    env = Env("train", train_tasks, cur, group_size, keys=train_keys)
    engine = Engine(
        solver,
        [env],
        EngineConfig(batch_groups=batch_groups, groups_per_generation=groups_per_generation),
        mesh=mesh,
    )
    k_init, k_rounds, k_eval = jax.random.split(key, 3)
    state = engine.init(k_init)
    insert = jax.jit(frontier.insert) if frontier else None
    judge = jax.jit(frontier.judge) if frontier else None
    evaluate = jax.jit(solver.evaluate)

    def set_frontier(state: EngineState, fstate) -> EngineState:
        cs = state.curricula["train"]
        return state._replace(curricula={"train": cs._replace(sampler=fstate)})

    if run_dir is not None:
        run_dir = os.path.abspath(os.fspath(run_dir))
    reports: list[RoundReport] = []
    held_out: list[float] = []
    summary: dict = {}
    for r in range(rounds):
        if challenger is not None and challenger.begin_round is not None:
            challenger.begin_round(spec, r)
        generated = invalid = collisions = 0
        easy_before = 0
        if frontier is not None:
            fstate = state.curricula["train"].sampler
            easy_before = int(fstate.dropped_easy)
            slot_keys, status = jax.device_get((fstate.keys, fstate.status))
            ch = run_challenge(
                challenger,
                spec,
                jax.random.fold_in(k_rounds, r),
                generated_per_round,
                layout,
                forbidden,
                on_frontier=slot_keys[status != EMPTY],  # one task in one slot at most
            )
            generated, invalid, collisions = ch.generated, ch.invalid, ch.collisions
            fstate = insert(
                fstate,
                jax.tree.map(jnp.asarray, ch.tasks),
                jnp.asarray(ch.valid),
                jnp.asarray(ch.keys),
                jnp.int32(r),
                jnp.asarray(ch.gen_seeds),
                jnp.int32(ch.invalid),
            )
            state = set_frontier(state, fstate)
        result = run(
            engine,
            steps=(r + 1) * steps_per_round,
            state=state,
            run_dir=run_dir,
            progress=progress,
            traces=traces,
            handle_signals=False,
        )
        state, summary = result.state, result.summary
        learned = stuck = dropped_easy = occupancy = 0
        r0 = 0.0
        verdicts: tuple[Verdict, ...] = ()
        if frontier is not None:
            fstate, rep = judge(state.curricula["train"].sampler)
            state = set_frontier(state, fstate)
            learned, stuck = int(rep.learned), int(rep.stuck)
            r0, occupancy = float(rep.r0), int(rep.occupancy)
            dropped_easy = int(fstate.dropped_easy) - easy_before
            verdicts = _verdicts(fstate, rep)
        c = jax.device_get(state.counters)
        report = RoundReport(
            round=r,
            spec=spec,
            generated=generated,
            invalid=invalid,
            collisions=collisions,
            learned=learned,
            stuck=stuck,
            dropped_easy=dropped_easy,
            r0=r0,
            occupancy=occupancy,
            steps=int(c.updates),
            rollouts=int(c.rollouts),
            metrics={k: v for k, v in result.metrics.items() if k != "time"},
            judged=verdicts,
        )
        # Measured after the round, recorded apart from the report: propose never sees it.
        held_reward = (
            float(jnp.mean(evaluate(state.solver, held_tasks, jax.random.fold_in(k_eval, r))))
            if num_held
            else float("nan")
        )
        reports.append(report)
        held_out.append(held_reward)
        if on_round is not None:
            on_round(report, held_reward)
        if challenger is not None:
            spec = challenger.propose(spec, report)
            if run_dir is not None and challenger.checkpoint is not None:
                # The challenger's state (its spec) is saved with the run, after each propose,
                # by every process, as the engine's checkpoints are (an Orbax save is
                # collective: on process 0 alone it waited for the others forever).
                challenger.checkpoint(spec, os.path.join(run_dir, "challenger"), r)
        if run_dir is not None and jax.process_index() == 0:
            writer = JsonlWriter(os.path.join(run_dir, "metrics.jsonl"))
            writer.write({"step": report.steps, "round": r, "eval/held_out_reward": held_reward})
            writer.close()

    history = [
        {
            **{k: v for k, v in dataclasses.asdict(rep).items() if k != "judged"},
            "held_out_reward": h,
        }
        for rep, h in zip(reports, held_out)
    ]
    if run_dir is not None and jax.process_index() == 0:
        out = {**summary, "final_reward": held_out[-1], "history": history}
        path = os.path.join(run_dir, "summary.json")
        write_json_atomic(path, out, indent=2, sort_keys=True, default=str)
    return EvolutionResult(
        final_reward=held_out[-1],
        history=history,
        curriculum=tuple(reports),
        held_out=tuple(held_out),
        state=state,
        engine=engine,
        spec=spec,
    )
