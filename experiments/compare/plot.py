"""The study's figure: share of seeds at the target and the mean held-out curve per arm."""

from __future__ import annotations

import os

import numpy as np

from experiments import _stats as S
from experiments._plot import pyplot
from experiments.compare.config import CompareConfig, budget, find_arm
from experiments.compare.report import reach


def plot(config: CompareConfig, curves: dict[str, dict], out_path: str) -> None:
    """Share of seeds at the target against rollouts (left) and the mean held-out success
    (right), one line per arm."""
    plt = pyplot(os.path.basename(out_path))
    if plt is None:
        return
    exp = config.experiment
    rates = any("pass_rate" in c for c in curves.values())
    fig, ax = plt.subplots(1, 3 if rates else 2, figsize=(16.5 if rates else 11, 4.2))
    grid = np.linspace(0, budget(config), 401)
    colors = plt.get_cmap("tab20").colors
    for i, (name, c) in enumerate(curves.items()):
        gated = bool(find_arm(config, name).get("curriculum", {}).get("gates"))
        style = {"color": colors[(2 * i) % 20 + (i >= 10)], "ls": "--" if gated else "-"}
        hits = reach(c, exp.target)
        ax[0].step(grid, S.reached_curve(hits, grid), where="post", label=name, **style)
        x = c["rollouts"][0]
        ax[1].plot(x, c["held_out"].mean(axis=0), label=name, **style)
        if "pass_rate" in c:
            in_target = np.isin(c["probe_category"], exp.task.target_levels)
            p = c["pass_rate"][:, :, in_target]
            ax[2].plot(x, ((p > 0) & (p < 1)).mean(axis=(0, 2)), label=name, **style)
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
    ax[0].legend(fontsize=8)
    fig.suptitle(config.title or "study")
    fig.tight_layout()
    fig.savefig(out_path, dpi=110)
    plt.close(fig)
