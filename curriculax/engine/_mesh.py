"""Device meshes for the engine: data parallelism over groups, optionally split task pools.

The engine's state is replicated over a 1-D mesh except the per-task fields (``PER_TASK``)
of envs built with ``shard_tasks=True``, which are split along the mesh axis. Rollouts and
credit are computed with the generation batch split along its group axis, and an update with
the training batch split along its group axis (gradients are reduced by XLA).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from curriculax._types import PER_TASK_ATTR, Curriculum

AXIS = "data"


def make_mesh(devices: int | None = None, axis: str = AXIS) -> Mesh:
    """A 1-D mesh over ``devices`` devices (default: all), with ``Auto`` axis type.

    In one process it takes the first ``devices`` of ``jax.devices()``. On several processes
    (after ``jax.distributed.initialize``) it takes ``devices / jax.process_count()`` devices
    from each process, in process order (a count not divisible by the process count is
    refused), so every process holds its share of the mesh whatever number of devices each
    one has.
    """
    available = jax.devices()
    if devices is None:
        n = len(available)
    elif isinstance(devices, bool) or not isinstance(devices, int | np.integer):
        raise TypeError(f"a device count must be a positive int, got {devices!r}")
    elif devices < 1:
        raise ValueError(f"a device count must be a positive int, got {devices!r}")
    else:
        n = int(devices)
    return Mesh(
        np.array(mesh_devices(available, n, jax.process_count())),
        (axis,),
        axis_types=(jax.sharding.AxisType.Auto,),
    )


def mesh_devices(available: list, n: int, processes: int) -> list:
    """The ``n`` devices of a mesh: the first ``n`` of ``available`` in one process, else
    ``n / processes`` from each process (by ``process_index``), or a ValueError."""
    if processes == 1:
        if n > len(available):
            raise ValueError(
                f"asked for {n} devices but {len(available)} are visible; on CPU set "
                "jax.config.update('jax_num_cpu_devices', n) before JAX starts"
            )
        return list(available[:n])
    if n % processes:
        raise ValueError(
            f"asked for {n} devices over {processes} processes: the mesh takes the same number "
            "of devices from each process, so the count must be a multiple of the process count"
        )
    per = n // processes
    chosen = []
    for p in range(processes):
        mine = [d for d in available if d.process_index == p]
        if len(mine) < per:
            raise ValueError(
                f"asked for {n} devices over {processes} processes ({per} from each), but "
                f"process {p} has {len(mine)}"
            )
        chosen += mine[:per]
    return chosen


def per_task_specs(state: Any, axis: str) -> Any:
    """PartitionSpecs for a curriculum state: ``P(axis)`` for declared per-task fields
    (``PER_TASK`` on a state NamedTuple, at any depth), ``P()`` for everything else."""

    def walk(node, split: bool):
        if isinstance(node, tuple) and hasattr(node, "_fields"):
            marked = set(getattr(type(node), PER_TASK_ATTR, ()))
            return type(node)(*(walk(getattr(node, f), f in marked) for f in node._fields))
        if isinstance(node, dict):
            return {k: walk(v, False) for k, v in node.items()}
        if isinstance(node, list | tuple):
            return type(node)(walk(v, False) for v in node)
        return P(axis) if split else P()

    return walk(state, False)


def has_per_task_fields(specs: Any) -> bool:
    return any(spec != P() for spec in jax.tree.leaves(specs, is_leaf=lambda x: isinstance(x, P)))


def shard_curriculum(cur: Curriculum, mesh: Mesh, axis: str, state_specs: Any) -> Curriculum:
    """The curriculum with ``sample``/``observe``/``metrics`` run under ``shard_map``: per-task
    state split along ``axis`` (its sampler must be built with ``axis_name=axis``),
    everything else replicated."""

    def smap(f, in_specs, out_specs):
        return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)

    def sample(state, key, num):
        return smap(lambda s, k: cur.sample(s, k, num), (state_specs, P()), (P(), state_specs))(
            state, key
        )

    def observe(state, results):
        return smap(cur.observe, (state_specs, P()), (P(), state_specs))(state, results)

    def metrics(state):
        return smap(cur.metrics, (state_specs,), P())(state)

    return cur._replace(sample=sample, observe=observe, metrics=metrics)


def shardings(specs: Any, mesh: Mesh) -> Any:
    """NamedShardings for a tree of PartitionSpecs."""
    return jax.tree.map(
        lambda spec: NamedSharding(mesh, spec), specs, is_leaf=lambda x: isinstance(x, P)
    )


def constrain(tree: Any, mesh: Mesh | None, spec: P) -> Any:
    """``with_sharding_constraint`` on every leaf (no-op without a mesh)."""
    if mesh is None:
        return tree
    sharding = NamedSharding(mesh, spec)
    return jax.tree.map(lambda x: jax.lax.with_sharding_constraint(x, sharding), tree)
