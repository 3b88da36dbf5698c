"""Quick start: drive a curriculum by hand on a tiny synthetic solver and print what it did.

python -m experiments.quickstart
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

import curriculax as cx


def main() -> None:
    num_tasks, num, group_size = 200, 16, 8
    difficulty = jnp.linspace(0.0, 1.0, num_tasks)  # hidden difficulty per task
    cur = cx.curriculum(
        cx.samplers.difficulty_pools(num_tasks),
        gates={"zero_advantage": cx.gates.advantage_range(0.0, 0.0)},
    )
    state = cur.init(jax.random.key(0))
    skill = jnp.float32(0.2)

    @jax.jit
    def step(state, skill, key):
        k_sample, k_roll = jax.random.split(key)
        ids, state = cur.sample(state, k_sample, num)
        p = jax.nn.sigmoid(10.0 * (skill - difficulty[ids]))
        rewards = jax.random.bernoulli(k_roll, p[:, None], (num, group_size)).astype(jnp.float32)
        adv = rewards - rewards.mean(axis=1, keepdims=True)
        results = cx.GroupResults(
            ids,
            rewards,
            jnp.ones_like(rewards, bool),
            adv[:, :, None],
            jnp.ones_like(adv, bool)[:, :, None],
        )
        admission, state = cur.observe(state, results)
        # Training on admitted groups nudges the skill toward their difficulty.
        gain = jnp.sum(jnp.where(admission.admitted, 0.02 * (difficulty[ids] >= skill - 0.1), 0.0))
        return state, jnp.minimum(skill + gain / num, 1.0), admission

    for i in range(40):
        state, skill, admission = step(state, skill, jax.random.key(i + 1))
        if i % 8 == 7:
            m = {k: float(v) for k, v in cur.metrics(state).items()}
            print(
                f"step {i + 1:3d}  skill {float(skill):.2f}  admitted {int(admission.admitted.sum()):2d}/{num}"
                f"  pools hard/medium/easy/unscored "
                f"{m['sampler/pool/hard']:.0f}/{m['sampler/pool/medium']:.0f}/"
                f"{m['sampler/pool/easy']:.0f}/{m['sampler/pool/unscored']:.0f}"
                f"  gate rejected {m['gate/zero_advantage/rejected']:.0f}"
            )


if __name__ == "__main__":
    main()
