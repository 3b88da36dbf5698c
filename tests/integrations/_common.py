"""Helpers shared by the adapter tests: a curriculum with a gate whose votes are easy to predict,
rewards that depend only on the task (so two runs observe the same), and spies."""

import json
import os
import re

import numpy as np
import pytest

import curriculax as cx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def even_tasks():
    """A gate that admits groups of even task ids (so zeroed advantages are easy to see)."""

    def admit(state, results):
        return results.task_ids % 2 == 0, state

    return cx.AdmissionGate(lambda key: cx.EmptyState(), admit, lambda state: {})


def host_curriculum(num_tasks, seed=0):
    """Difficulty pools, the zero-advantage gate and :func:`even_tasks`."""
    return cx.HostCurriculum(
        cx.curriculum(
            cx.samplers.difficulty_pools(num_tasks),
            gates={"zero_advantage": cx.gates.advantage_range(0.0, 0.0), "even": even_tasks()},
        ),
        seed=seed,
    )


def solved(task_ids, group_size):
    """``f32[G, K]``: task t solves ``t % (K + 1)`` of its K rollouts."""
    ids = np.asarray(task_ids).reshape(-1, 1)
    return (np.arange(group_size)[None, :] < ids % (group_size + 1)).astype(np.float32)


def mixed(task_id, group_size):
    """The group of this task has rewards that differ (non-zero GRPO advantages)."""
    return 0 < task_id % (group_size + 1) < group_size


def admitted(task_id, group_size):
    """What :func:`host_curriculum` admits for a group with :func:`solved` rewards."""
    return mixed(task_id, group_size) and task_id % 2 == 0


def check_gated_advantages(batches, group_size, zeroed):
    """Each ``(task ids, advantages [G, K], admission)`` batch: the admission is the expected
    one and rejected groups carry zero advantages iff ``zeroed``. Returns how many groups were
    admitted and how many had mixed rewards but were rejected (both must occur)."""
    counts = {"admitted": 0, "rejected_mixed": 0}
    for ids, adv, got in batches:
        assert got.tolist() == [admitted(i, group_size) for i in ids]
        for i, row, ok in zip(ids, adv, got):
            if ok:
                assert np.all(row != 0)
                counts["admitted"] += 1
            elif mixed(i, group_size):
                assert np.all(row == 0) if zeroed else np.all(row != 0)
                counts["rejected_mixed"] += 1
            else:
                assert np.all(row == 0)  # equal rewards: GRPO gives no advantage
    assert counts["admitted"] > 0 and counts["rejected_mixed"] > 0, counts
    return counts


class Spy:
    """Records a HostCurriculum's draws, the task ids it observed, and both in the order they
    happened (``events``: ``("draw", ids)`` and ``("observe", ids)``)."""

    def __init__(self, cur):
        self.drawn, self.observed, self.events = [], [], []
        sample, observe = cur.sample, cur.observe

        def spy_sample(n, **kwargs):
            ids = sample(n, **kwargs)
            self.drawn.append(np.asarray(ids).tolist())
            self.events.append(("draw", self.drawn[-1]))
            return ids

        def spy_observe(ids, *args, **kwargs):
            self.observed.extend(np.asarray(ids).tolist())
            self.events.append(("observe", np.asarray(ids).tolist()))
            return observe(ids, *args, **kwargs)

        cur.sample, cur.observe = spy_sample, spy_observe


def readme_block(section):
    """The python block of docs/integrations.md's ``## <section>`` ("tunix" or "TRL")."""
    with open(os.path.join(ROOT, "docs", "integrations.md")) as f:
        text = f.read()
    part = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```python\n(.*?)```", part, re.S)
    return block


# A trainer demo's flags it must refuse before it builds anything, with the message's start.
BAD_FLAGS = [
    (["--steps", "0"], r"^--steps must be >= 1, got 0 \(updates to train\)"),
    (["--steps", "-1"], r"^--steps must be >= 1, got -1"),
    (["--seed", "-1"], r"^--seed must be an int in \[0, 2\*\*32\)"),
]


def never(*args, **kwargs):
    """Stands in for what a script builds: a bad flag must stop it first."""
    raise AssertionError("the script built its model despite a bad flag")


def check_the_seed_is_kept(main, run, seeds):
    """A trainer demo's ``main`` started with ``--seed 1`` stores it, refuses another seed on
    ``--resume`` and resumes with the stored one (``seeds``: the seeds its tasks were built
    from, recorded by the caller)."""
    main(["--run-dir", str(run), "--steps", "1", "--seed", "1"])
    assert json.loads((run / "seed.json").read_text()) == {"seed": 1}
    with pytest.raises(SystemExit, match=r"--seed 0, but the run in .* started with seed 1"):
        main(["--run-dir", str(run), "--steps", "2", "--resume", "--seed", "0"])
    main(["--run-dir", str(run), "--steps", "2", "--resume"])
    assert seeds == [1, 1]
