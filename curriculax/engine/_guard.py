"""The no-progress guard: a curriculum that admits nothing must not spin forever."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


class CurriculumStalled(RuntimeError):
    """Raised when ``stall_windows`` batch-equivalents in a row admitted no group."""


def stall_message(
    *,
    windows: int,
    batch_groups: int,
    since_progress: Mapping[str, int],
    gate_votes: Mapping[str, Mapping[str, tuple[int, int]]],
    curriculum_metrics: Mapping[str, Mapping[str, float]],
    gates: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """Names each env that produced groups since the last admission, each of its gates' admit
    rate over those groups, and what to check.

    Args:
      windows: consecutive no-progress windows.
      batch_groups: groups per window (``B``).
      since_progress: ``{env: groups finalized since the last admitted group}``.
      gate_votes: ``{env: {gate: (groups it admitted, groups it voted on)}}`` since the last
        admitted group, counted by this process (after a resume, only the groups since it:
        the message says so).
      curriculum_metrics: ``{env: curriculum metrics}`` (``failed_groups``, ``nonfinite``,
        ``out_of_range``).
      gates: ``{env: its gates' names}`` as configured (default: the gates in ``gate_votes``).
        An env with gates but no votes counted (not drawn since the run resumed) is named
        with its gates and says so, not as an env without gates.
    """
    lines = [
        f"no group was admitted for {windows} consecutive batch-equivalents "
        f"({windows} x {batch_groups} = {windows * batch_groups} finalized groups or more)."
    ]
    hints = set()
    for env, groups in since_progress.items():
        if groups <= 0:
            continue
        votes = gate_votes.get(env, {})
        configured = list(votes) if gates is None else list(gates.get(env, ()))
        configured += [g for g in votes if g not in configured]
        rates = ", ".join(
            f"gate {g!r} admit rate {a / max(t, 1):.2f} ({a}/{t})" for g, (a, t) in votes.items()
        )
        unvoted = [g for g in configured if g not in votes]
        if unvoted:  # the votes are the process's, the count the checkpoint's
            names = ", ".join(repr(g) for g in unvoted)
            rates += (", " if rates else "") + (
                f"{'gate' if len(unvoted) == 1 else 'gates'} {names}: no votes counted (the run "
                "resumed from a checkpoint or a given state since the last admission, and this "
                "env was not drawn since)"
            )
        counted = max((t for _, t in votes.values()), default=groups)
        if counted < groups:  # the votes are the process's, the count the checkpoint's
            rates += (
                f" (votes over the last {counted} of them: the run resumed from a checkpoint "
                "or a given state since the last admission)"
            )
        m = curriculum_metrics.get(env, {})
        failed = m.get("failed_groups", 0.0)
        nonfinite = m.get("nonfinite", 0.0)
        out_of_range = m.get("out_of_range", 0.0)
        lines.append(
            f"  env {env!r}: {groups} groups since the last admission; "
            f"{rates or 'no gates'}; failed groups so far {failed:.0f}"
            + (f" ({out_of_range:.0f} with a task id outside the pool)" if out_of_range else "")
            + f"; non-finite rollouts so far {nonfinite:.0f}"
        )
        for g, (a, t) in votes.items():
            if t and a == 0:
                hints.add(
                    f"gate {g!r} rejects every group: if it is an advantage-range gate, every "
                    "group scored the same (collapsed policy, or tasks all too easy / too hard): "
                    "try a higher sampling temperature, an entropy bonus, mean-only advantages, "
                    "a larger group size, or a curriculum that picks tasks of middling difficulty"
                )
        if failed > out_of_range:
            hints.add("groups fail (no valid rollout): check the rollout/verifier for errors")
        if out_of_range > 0:
            hints.add(
                "task ids outside the pool [0, num_tasks): the sampler hands out ids past its "
                "pool (a custom sampler's num_tasks, or its sample())"
            )
        if nonfinite > 0:
            hints.add("rewards or advantages are NaN/inf: check the reward function and credit")
    lines.append("What to check:")
    lines.extend(f"  - {h}" for h in sorted(hints) or ["the gates' thresholds and the rewards"])
    lines.append("Set stall_policy='warn' to keep going, or raise stall_windows to wait longer.")
    return "\n".join(lines)
