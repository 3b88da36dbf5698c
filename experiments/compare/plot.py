"""The study's figure: share of seeds at the target and the mean held-out curve per arm."""

from __future__ import annotations

import os

import numpy as np

from experiments import _stats as S
from experiments._plot import figure
from experiments.compare.config import CompareConfig, budget, find_arm
from experiments.compare.report import reach, sometimes


def plot(config: CompareConfig, curves: dict[str, dict], out_path: str) -> None:
    """Share of seeds at the target against rollouts (left) and the mean held-out success
    (right), one line per arm, the legend under the panels (inside one, long arm names hid
    the curves)."""
    rates = any("pass_rate" in c or "sometimes" in c for c in curves.values())
    width = 16.5 if rates else 11
    # two legend columns where the longest name fits half the width (~0.075 inch a character
    # at size 8), else one
    ncol = 2 if max(map(len, curves), default=0) * 0.075 < width / 2 - 0.6 else 1
    size = (width, 4.2 + 0.18 * -(-len(curves) // ncol))
    fig = figure(os.path.basename(out_path), figsize=size, layout="constrained")
    if fig is None:
        return
    from matplotlib import colormaps  # after figure(): matplotlib is there

    exp = config.experiment
    ax = fig.subplots(1, 3 if rates else 2)
    grid = np.linspace(0, budget(config), 401)
    colors = colormaps["tab20"].colors
    for i, (name, c) in enumerate(curves.items()):
        gated = bool(find_arm(config, name).get("curriculum", {}).get("gates"))
        style = {"color": colors[(2 * i) % 20 + (i >= 10)], "ls": "--" if gated else "-"}
        hits = reach(c, exp.target)
        ax[0].step(grid, S.reached_curve(hits, grid), where="post", label=name, **style)
        x = c["rollouts"][0]
        ax[1].plot(x, c["held_out"].mean(axis=0), label=name, **style)
        if "pass_rate" in c or "sometimes" in c:
            ax[2].plot(x, sometimes(c, exp.task.target_levels).mean(axis=0), label=name, **style)
    ax[0].set(xlabel="solver rollouts", ylabel="share of seeds at target", ylim=(-0.02, 1.02))
    ax[1].axhline(exp.target, color="grey", lw=0.8, ls="--")
    ax[1].set(xlabel="solver rollouts", ylabel="held-out exact match (mean)", ylim=(0, 1))
    if rates:
        ax[2].set(
            xlabel="solver rollouts",
            ylabel="target-level tasks with 0 < p < 1 (probe)",
            ylim=(0, None),
        )
    for a in ax:
        a.grid(alpha=0.3)
    handles, labels = ax[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=8)
    fig.suptitle(config.title or "study")
    fig.savefig(out_path, dpi=110, bbox_inches="tight")  # a name wider than the figure too


def stored_curves(data: dict[str, dict]) -> dict[str, dict] | None:
    """The curves :func:`plot` draws, from a study's per-seed numbers (``compare.json``'s
    ``arms``): rollouts and held-out success per evaluation, and the third panel's per-seed
    curve (``curve_sometimes``) where the arms probed pass rates. None where an arm probed
    them and its curve is not stored (studies run before it was kept): that figure cannot be
    redrawn."""
    if any("pass_rates" in d and "curve_sometimes" not in d for d in data.values()):
        return None

    def rows(stored) -> np.ndarray:  # null (no number) as NaN
        return np.asarray([[np.nan if x is None else x for x in row] for row in stored], float)

    curves = {}
    for name, d in data.items():
        held = rows(d["curve_held_out"])
        rollouts = np.asarray(d["curve_rollouts"], float)
        curves[name] = {"rollouts": np.tile(rollouts, (held.shape[0], 1)), "held_out": held}
        if "curve_sometimes" in d:
            curves[name]["sometimes"] = rows(d["curve_sometimes"])
    return curves
