"""The transformer policy: config checks, padding invariance, KV-cache equivalence."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from curriculax import rl
from curriculax import tasks as T

CFG = rl.TransformerConfig(T.VOCAB_SIZE, width=32, depth=2, heads=4, max_len=24)


@functools.cache
def _policy():
    return rl.init_policy(CFG, jax.random.key(0))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"width": 30, "heads": 4}, "not divisible"),
        ({"depth": 0}, "depth"),
        ({"max_len": 0}, "max_len"),
    ],
)
def test_config_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        rl.TransformerConfig(T.VOCAB_SIZE, **kwargs)


def test_params_are_a_plain_dict_of_f32_arrays():
    graphdef, params = _policy()
    paths = [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_leaves_with_path(params)]
    assert all(
        isinstance(k, str)
        for p, _ in jax.tree_util.tree_leaves_with_path(params)
        for k in (e.key for e in p)
    )
    assert "['block_1']['qkv']['kernel']" in paths
    assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(params))
    # tied embeddings (the default): no separate output matrix
    assert "out" not in params and params["embed"]["embedding"].shape == (T.VOCAB_SIZE, 32)
    untied = rl.TransformerConfig(T.VOCAB_SIZE, width=32, tie_embeddings=False)
    assert rl.init_policy(untied, jax.random.key(0))[1]["out"]["kernel"].shape == (32, 33)
    assert isinstance(graphdef, nnx.GraphDef)


def test_left_padding_does_not_change_logits():
    graphdef, params = _policy()
    tokens = jnp.array([[1, 5, 17, 18, 2]])
    padded = jnp.array([[0, 0, 0, 1, 5, 17, 18, 2]])
    apply = jax.jit(rl.apply_policy, static_argnums=0)
    np.testing.assert_allclose(
        apply(graphdef, params, tokens)[0], apply(graphdef, params, padded)[0, 3:], atol=1e-5
    )
    np.testing.assert_array_equal(rl.positions_from_tokens(padded), [[0, 0, 0, 0, 1, 2, 3, 4]])


def test_kv_cache_decoding_matches_full_forward():
    graphdef, params = _policy()
    prompts = jnp.array([[0, 0, 1, 5, 17, 2], [1, 5, 17, 18, 19, 2]])
    new = jnp.array([[20, 21, 3], [22, 3, 23]])

    @jax.jit
    def decode_all(params):
        model = nnx.merge(graphdef, params)
        logits, cache = model.prefill(prompts, 9)
        out = [logits]
        start = jnp.sum(prompts != T.PAD, axis=1)
        for t in range(2):
            logits, cache = model.decode(new[:, t], start + t, jnp.int32(6 + t), cache)
            out.append(logits)
        return jnp.stack(out, axis=1)

    full = rl.apply_policy(graphdef, params, jnp.concatenate([prompts, new], axis=1))
    np.testing.assert_allclose(decode_all(params), full[:, 5:8], atol=1e-5)


def test_sequence_longer_than_max_len_is_rejected():
    graphdef, params = _policy()
    with pytest.raises(ValueError, match="max_len"):
        rl.apply_policy(graphdef, params, jnp.ones((1, 25), jnp.int32))


def test_column_positions_give_one_rule_for_every_length():
    """With column positions a left-padded prompt's tokens sit at fixed columns, so a token's
    features do not depend on how much padding precedes the prompt; cached decoding agrees
    with the full forward pass."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from curriculax import rl
    from curriculax import tasks as T

    cfg = rl.TransformerConfig(
        T.VOCAB_SIZE, width=32, depth=2, heads=4, max_len=24, positions="column"
    )
    graphdef, params = rl.init_policy(cfg, jax.random.key(0))
    prompts = jnp.array([[0, 0, 1, 5, 17, 2], [1, 5, 17, 18, 19, 2]], jnp.int32)
    full = rl.apply_policy(graphdef, params, prompts)
    shifted = rl.apply_policy(graphdef, params, jnp.pad(prompts, ((0, 0), (2, 0)))[:, :6])
    assert not np.allclose(full[0, -1], shifted[0, -1])  # a column shift changes the features
    a = rl.sample(graphdef, params, prompts, jax.random.key(1), max_new_tokens=5, temperature=1.0)
    b = rl.sample(
        graphdef,
        params,
        prompts,
        jax.random.key(1),
        max_new_tokens=5,
        temperature=1.0,
        use_cache=False,
    )
    np.testing.assert_array_equal(a.tokens, b.tokens)
    with pytest.raises(ValueError, match="positions"):
        rl.TransformerConfig(T.VOCAB_SIZE, positions="rotary")
