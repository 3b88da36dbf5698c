"""The shared draw of group labels (``curriculax._groups.draw_groups``) stops after
``min(C, num) + 1`` rounds, where it ran ``C + 1``: the same draws, at a cost that no longer
grows as C^2 (seconds a call for thousands of categories)."""

import jax.numpy as jnp
import numpy as np
import pytest

from curriculax._groups import draw_groups


@pytest.mark.parametrize("seed", range(6))
def test_fewer_rounds_than_categories_give_the_draws_of_c_plus_1_rounds(seed):
    rng = np.random.default_rng(seed)
    c, num = 40, 10
    # Groups of one member with skewed weights (a call retires many), some empty or weight 0.
    counts = (rng.uniform(size=c) > 0.2).astype(np.int32)
    weights = rng.uniform(0, 1, size=c).astype(np.float32) ** 8 * (rng.uniform(size=c) > 0.2)
    uniforms = jnp.asarray(rng.uniform(size=(c + 1, c)), jnp.float32)
    got = draw_groups(uniforms[:, :num], weights, jnp.asarray(counts))
    # The same draw over C positions runs C + 1 rounds; a position's label and rank depend on
    # the positions before it only, so its first num positions are the C + 1 rounds' draw.
    full = draw_groups(uniforms, weights, jnp.asarray(counts))
    assert int(got[2]) == int(full[2])
    meaningful = min(num, int(full[2]))
    np.testing.assert_array_equal(np.asarray(got[0])[:meaningful], np.asarray(full[0])[:meaningful])
    np.testing.assert_array_equal(np.asarray(got[1])[:meaningful], np.asarray(full[1])[:meaningful])
    # Every group gave out at most its members.
    labels = np.asarray(got[0])[:meaningful]
    assert (np.bincount(labels, minlength=c) <= counts).all()
    assert (weights[labels] > 0).all()
