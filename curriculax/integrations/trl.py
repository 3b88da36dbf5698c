"""TRL: a curriculum chooses the prompts of TRL's ``GRPOTrainer``.

TRL asks ``GRPOTrainer._get_train_sampler(dataset)`` for the dataset indices to load and calls
reward functions with every dataset column, so:

- **sampler**: :class:`CurriculumSampler` yields the indices the curriculum draws, in TRL's
  ``RepeatSampler`` layout (each generation batch's prompts drawn at once; each index repeated
  ``num_generations`` times in a row; the whole block repeated ``num_iterations *
  steps_per_generation`` times, once per optimisation step that reuses the generations);
- **observe**: :class:`CurriculumReward` wraps the reward functions: it returns their weighted
  sum (TRL's ``reward_weights``, ``None`` and NaN as TRL treats them) and feeds every group to
  the curriculum, the task ids read from the ``task_id`` column (added when missing: row ``i``
  is task ``i``); the curriculum's metrics are logged under ``curriculum/``: a per-batch one
  (``admission_rate``, a gate's ``admit_rate``, ``zero_variance_share``) as its mean over the
  logging window, like TRL's own metrics, every other one (running totals, snapshots) as its
  value after the window's last batch;
- **gates**: TRL cannot drop a group from a batch either, so :class:`CurriculumGRPOTrainer`
  zeroes the advantages of rejected groups (``gates="zero_advantages"``, the default; exact for
  a zero-advantage gate, and for any other gate it removes the group's policy-gradient term,
  while the group still counts in the loss normalisation, the KL penalty and TRL's entropy
  bonus (``entropy_coef``), with no backfill) or only logs the votes (``gates="log"``). The
  gates read the curriculum's own GRPO advantages (computed when the rewards are observed:
  population std, every group scaled), not TRL's (Bessel's std, ``scale_rewards``): a
  zero-advantage gate decides the same on both, a gate on advantage magnitudes
  (``advantage_range`` with other bounds) does not see the numbers TRL trains on;
- **checkpoints**: each checkpoint folder gets ``curriculum/`` (the curriculum's Orbax
  checkpoint plus the draws in flight as JSON) and ``train(resume_from_checkpoint=...)``
  restores it. Hugging Face's ``Trainer`` resumes by skipping the batches already trained,
  which would draw from the curriculum without feedback, so the trainer sets
  ``ignore_data_skip=True``: the restored curriculum continues where the run stopped. A resumed
  run draws what the uninterrupted one would have when checkpoints fall at generation
  boundaries (``save_steps`` a multiple of the optimisation steps one generation serves; TRL
  itself regenerates a batch whose generations were not saved) and ``max_steps`` is set: the
  sampler's one epoch then covers the run, as an epoch's end (where the loader stops drawing
  ahead) would fall at different steps in a resumed run, which starts a new epoch. Training by
  ``num_train_epochs``, a resumed run is exact up to the end of the epoch it resumed in.

One process only: a reward function sees its own process's rows, so with several processes
each curriculum would observe a different part of the batch (the trainer refuses to start).
The curriculum observes the reward functions alone, so an ``environment_factory`` whose
environment defines ``get_reward`` (a reward TRL adds beside them) is refused too: score the
environment in a reward function instead (it gets the rollouts' ``environments``).

Example (``model``, ``tokenizer``, ``dataset`` with a ``"prompt"`` column, ``reward_fn``):
  >>> import curriculax as cx
  >>> from trl import GRPOConfig
  >>> from curriculax.integrations.trl import CurriculumGRPOTrainer
  >>> cur = cx.HostCurriculum(cx.curriculum(cx.samplers.difficulty_pools(len(dataset)),
  ...     gates={"zero_advantage": cx.gates.advantage_range(0.0, 0.0)}))
  >>> trainer = CurriculumGRPOTrainer(model=model, reward_funcs=reward_fn,
  ...     args=GRPOConfig(output_dir="runs/trl"), train_dataset=dataset,
  ...     processing_class=tokenizer, curriculum=cur)
  >>> trainer.train()
"""

from __future__ import annotations

import copy
import inspect
import json
import math
import os
import re
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Sampler
from transformers.trainer_utils import get_last_checkpoint
from trl import GRPOTrainer

from curriculax._checks import int_at_least
from curriculax._files import write_json_atomic
from curriculax.integrations._ledger import (
    GATES,
    DrawLedger,
    answers_of,
    check_answer_key,
    check_gates,
    per_batch,
    rows_to_keep,
    split_groups,
)

__all__ = ["GATES", "CurriculumGRPOTrainer", "CurriculumReward", "CurriculumSampler"]

_DRAWS_FILE = "draws.json"
_OBSERVED_REWARD = (
    "the curriculum observes only the reward functions' sum, so an environment's get_reward "
    "(environment_factory) would train the model on a reward its gates never see; rename the "
    "environment's get_reward (e.g. to score) and pass a reward function that reads it (reward "
    "functions get the rollouts' environments): def env_reward(environments, **kwargs): "
    "return [env.score() for env in environments]"
)


class CurriculumSampler(Sampler[int]):
    """Dataset indices chosen by a curriculum, in TRL's ``RepeatSampler`` layout.

    Args:
      ledger: the :class:`~curriculax.integrations.DrawLedger` to draw from.
      num_generations: rollouts per prompt (each index repeated this many times in a row).
      prompts_per_generation: prompts per generation batch (one draw).
      repeat_count: times each generation batch's block is repeated
        (``num_iterations * steps_per_generation``).
      num_draws: draws per pass (an "epoch"; the trainer makes it cover the whole run when
        ``max_steps`` is set, else ``len(dataset) // prompts_per_generation``).

    Example:
      >>> ledger = DrawLedger(cx.HostCurriculum(cx.curriculum(cx.samplers.sequential(6))), 6)
      >>> list(CurriculumSampler(ledger, num_generations=2, prompts_per_generation=3,
      ...                        repeat_count=2, num_draws=1))   # the draw is [3, 1, 5]
      [3, 3, 1, 1, 5, 5, 3, 3, 1, 1, 5, 5]
    """

    def __init__(
        self,
        ledger: DrawLedger,
        *,
        num_generations: int,
        prompts_per_generation: int,
        repeat_count: int,
        num_draws: int,
    ):
        self.ledger = ledger
        self.num_generations = int_at_least(num_generations, "num_generations")
        self.prompts_per_generation = int_at_least(prompts_per_generation, "prompts_per_generation")
        self.repeat_count = int_at_least(repeat_count, "repeat_count")
        self.num_draws = int_at_least(num_draws, "num_draws")

    def __iter__(self):
        for _ in range(self.num_draws):
            ids = self.ledger.draw(self.prompts_per_generation)
            block = np.repeat(ids, self.num_generations).tolist()
            for _ in range(self.repeat_count):
                yield from block

    def __len__(self) -> int:
        per_draw = self.prompts_per_generation * self.num_generations * self.repeat_count
        return self.num_draws * per_draw


class CurriculumReward:
    """A TRL reward function: the weighted sum of the given ones, and every group observed.

    TRL calls it with the rows of one generation batch (each prompt's ``num_generations``
    completions in a row) and every dataset column. It returns ``sum_i weight_i * f_i`` per row
    (NaN-aware: a function's ``None`` is skipped, a row no function scored is ``None``), and,
    while ``observing``, feeds the groups to the curriculum (an unscored row is an invalid
    rollout).

    Args:
      reward_funcs: callables ``f(prompts=, completions=, **columns) -> list[float | None]``.
      ledger: the :class:`~curriculax.integrations.DrawLedger` the sampler draws from.
      num_generations: completions per prompt.
      weights: one weight per function (default: all 1).
      task_field: the column with each row's task id.
      answer_key: ``answer_key(completion) -> answer`` (e.g. the final answer your verifier
        reads), or None. Given, each rollout's answer id (from the answer's text) goes to the
        curriculum with its reward, for :func:`~curriculax.samplers.reward_consistency`. It
        must capture everything the summed reward depends on: a format bonus makes equal
        extracted answers earn different rewards, which the check reads as a contradiction
        (return e.g. ``(answer, well_formatted)``). ``None`` means no answer: each such
        rollout gets an id of its own.

    Attributes:
      observing: feed groups to the curriculum (off during evaluation).
      last_admitted: ``np.bool_[G]`` the admission of the last batch observed (or None).
    """

    def __init__(
        self,
        reward_funcs: Callable | Sequence[Callable],
        ledger: DrawLedger,
        *,
        num_generations: int,
        weights: Sequence[float] | None = None,
        task_field: str = "task_id",
        answer_key: Callable[[Any], Any] | None = None,
    ):
        self.answer_key = check_answer_key(answer_key)
        funcs = list(reward_funcs) if isinstance(reward_funcs, Sequence) else [reward_funcs]
        if not funcs:
            raise ValueError("CurriculumReward needs at least one reward function")
        for f in funcs:
            if isinstance(f, str | torch.nn.Module) or not callable(f):
                raise TypeError(
                    "CurriculumReward wraps reward functions (callables); a reward model "
                    f"({f!r}) cannot be wrapped: score with it inside a function"
                )
            if inspect.iscoroutinefunction(f) or inspect.iscoroutinefunction(type(f).__call__):
                raise TypeError(f"async reward functions are not supported here: {f!r}")
        if weights is not None and len(weights) != len(funcs):
            raise ValueError(f"{len(weights)} reward weights for {len(funcs)} reward functions")
        self.reward_funcs = funcs
        self.weights = np.ones(len(funcs)) if weights is None else np.asarray(weights, float)
        self.ledger = ledger
        self.num_generations = int_at_least(num_generations, "num_generations")
        self.task_field = str(task_field)
        self.observing = True
        self.last_admitted: np.ndarray | None = None
        names = [getattr(f, "__name__", type(f).__name__) for f in funcs]
        self._names = names
        self.__name__ = names[0] if len(funcs) == 1 else "curriculum_reward"

    def __call__(self, prompts, completions, **kwargs) -> list[float | None]:
        per_func = np.full((len(prompts), len(self.reward_funcs)), np.nan)
        for j, f in enumerate(self.reward_funcs):
            out = f(prompts=prompts, completions=completions, **kwargs)
            if len(out) != len(prompts):
                raise ValueError(
                    f"reward function {self._names[j]!r} returned {len(out)} rewards for "
                    f"{len(prompts)} completions"
                )
            per_func[:, j] = [np.nan if r is None else float(r) for r in out]
        scored = ~np.isnan(per_func).all(axis=1)
        total = np.nansum(per_func * self.weights, axis=1)
        total[~scored] = np.nan
        self.last_admitted = None
        log_metric = kwargs.get("log_metric")
        if self.observing:
            ids = kwargs.get(self.task_field)
            if ids is None:
                raise KeyError(
                    f"the reward function got no {self.task_field!r} column: the dataset needs "
                    "one holding each row's index (CurriculumGRPOTrainer adds it), and the "
                    "trainer must pass it on (Trainer's remove_unused_columns=True drops every "
                    "column outside its signature; CurriculumGRPOTrainer keeps this one)"
                )
            answers = answers_of(self.answer_key, completions)
            ids, rewards, answers = split_groups(ids, self.num_generations, total, answers)
            valid = np.isfinite(rewards)
            admitted = self.ledger.observe(
                ids, np.where(valid, rewards, 0.0), valid, answers=answers
            )
            self.last_admitted = admitted
            if log_metric is not None:
                # All go through TRL's log_metric; CurriculumGRPOTrainer.log keeps only the
                # window's last value of those that are not per batch.
                for name, value in self.ledger.curriculum.metrics().items():
                    log_metric(f"curriculum/{name}", value)
        if log_metric is not None and len(self.reward_funcs) > 1:
            for j, name in enumerate(self._names):
                if not np.isnan(per_func[:, j]).all():
                    log_metric(f"rewards/{name}/mean", float(np.nanmean(per_func[:, j])))
        return [float(r) if math.isfinite(r) else None for r in total]


class CurriculumGRPOTrainer(GRPOTrainer):
    """TRL's ``GRPOTrainer`` with a curriculum choosing its prompts.

    Takes ``GRPOTrainer``'s arguments plus the keywords below. The reward functions are wrapped
    in one :class:`CurriculumReward` (with ``args.reward_weights``), the train sampler is a
    :class:`CurriculumSampler`, rejected groups' advantages are zeroed (or only logged), and
    checkpoints carry the curriculum.

    A second ``train()`` (not resumed) hands out first the draws the last one's loader made
    ahead and never trained. ``remove_unused_columns=True`` keeps the ``task_field`` column.

    Args:
      curriculum: a :class:`curriculax.HostCurriculum` over ``len(train_dataset)`` tasks (task
        ``i`` is row ``i``).
      gates: one of :data:`GATES`: ``"zero_advantages"`` (default) or ``"log"``.
      task_field: the dataset column with each row's index (added when missing).
      answer_key: ``answer_key(completion) -> answer`` or None: given, each rollout's answer id
        reaches the curriculum (for :func:`~curriculax.samplers.reward_consistency`, which
        marks and skips tasks whose reward gave one answer two rewards). It must capture
        everything the summed reward depends on (with a format bonus, e.g. ``(answer,
        well_formatted)``: equal extracted answers with different bonuses read as a
        contradiction); ``None`` means no answer (each such rollout gets an id of its own).

    Attributes:
      curriculum: the :class:`curriculax.HostCurriculum`.
      curriculum_ledger: the draws in flight.
      curriculum_reward: the wrapped reward function.

    Raises:
      ValueError: a streaming dataset, a ``task_field`` column that is not the row index,
        ``normalize_then_sum`` with several reward functions, no reward functions, an
        environment that defines ``get_reward`` (TRL would add its reward, unobserved, to the
        one the curriculum sees), or several processes.
    """

    def __init__(
        self,
        *args,
        curriculum: Any,
        gates: str = "zero_advantages",
        task_field: str = "task_id",
        answer_key: Callable[[Any], Any] | None = None,
        **kwargs,
    ):
        check_gates(gates)
        bound = inspect.signature(GRPOTrainer.__init__).bind(None, *args, **kwargs)
        given = bound.arguments
        dataset = given.get("train_dataset")
        if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
            raise ValueError(
                "CurriculumGRPOTrainer needs a map-style train_dataset (a datasets.Dataset): the "
                "curriculum picks rows by index"
            )
        given["train_dataset"] = _with_task_ids(dataset, task_field)
        config = given.get("args")
        funcs = given.get("reward_funcs")
        funcs = list(funcs) if isinstance(funcs, list | tuple) else [funcs]
        if given.get("reward_funcs") is None or not funcs:
            why = (
                _OBSERVED_REWARD
                if given.get("environment_factory") is not None
                else "the curriculum observes their rewards"
            )
            raise ValueError(f"CurriculumGRPOTrainer needs reward_funcs: {why}")
        weights = None
        if config is not None:
            if len(funcs) > 1 and config.multi_objective_aggregation != "sum_then_normalize":
                raise ValueError(
                    "with several reward functions the curriculum observes their weighted sum; "
                    "use multi_objective_aggregation='sum_then_normalize'"
                )
            weights = config.reward_weights
            config = copy.copy(config)  # one wrapped function, so no per-function weights
            config.reward_weights = None
            given["args"] = config
        self.curriculum = curriculum
        self.curriculum_ledger = DrawLedger(curriculum, len(dataset))
        self.curriculum_reward = CurriculumReward(
            funcs,
            self.curriculum_ledger,
            num_generations=2,  # TRL's own value is set below, once the trainer has resolved it
            weights=weights,
            task_field=task_field,
            answer_key=answer_key,
        )
        given["reward_funcs"] = [self.curriculum_reward]
        given.pop("self", None)
        super().__init__(**given)
        if len(self.reward_funcs) > 1:  # TRL added an environment's get_reward
            raise ValueError(
                f"TRL adds the reward of {self.reward_func_names[1:]} (an environment's "
                f"get_reward) to the reward functions' sum, unobserved: {_OBSERVED_REWARD}"
            )
        self.curriculum_reward.num_generations = self.num_generations
        # Resuming, HF's Trainer skips the batches already trained by drawing them again; the
        # restored curriculum continues where the run stopped instead.
        self.args.ignore_data_skip = True
        self.gates = gates
        if self.accelerator.num_processes > 1:
            raise ValueError(
                "CurriculumGRPOTrainer runs in one process: each process's reward function sees "
                "only its own rows, so the curricula would diverge"
            )

    def _get_train_sampler(self, dataset=None) -> CurriculumSampler:
        dataset = self.train_dataset if dataset is None else dataset
        if len(dataset) != self.curriculum_ledger.num_records:
            raise ValueError(
                f"the train dataset has {len(dataset)} rows, the curriculum's ledger "
                f"{self.curriculum_ledger.num_records}"
            )
        per_draw = self.args.generation_batch_size // self.num_generations
        if len(dataset) < per_draw:
            raise ValueError(f"{len(dataset)} rows cannot fill a draw of {per_draw} prompts")
        repeat_count = self.num_iterations * self.args.steps_per_generation
        num_draws = len(dataset) // per_draw
        if self.args.max_steps > 0:
            # One epoch for the whole run. The loader draws a batch ahead, except across the end
            # of an epoch, and a resumed run starts a new epoch at its first step: an epoch end
            # inside the run would fall at different steps in a resumed and an uninterrupted
            # run, and the curriculum would observe and draw in a different order. Each draw
            # serves ``repeat_count`` loader batches; one more draw than the run trains keeps
            # the epoch's end past the last step.
            micro_steps = self.args.max_steps * self.args.gradient_accumulation_steps
            num_draws = -(-micro_steps // repeat_count) + 1
        return CurriculumSampler(
            self.curriculum_ledger,
            num_generations=self.num_generations,
            prompts_per_generation=per_draw,
            repeat_count=repeat_count,
            num_draws=num_draws,
        )

    def _generate_and_score_completions(self, inputs):
        reward = self.curriculum_reward
        training = self.model.training
        reward.observing = training
        try:
            out = super()._generate_and_score_completions(inputs)
        finally:
            reward.observing = True
        if not training:
            return out
        advantages = out["advantages"]
        keep = rows_to_keep(
            self.gates, reward.last_admitted, self.num_generations, advantages.shape[0]
        )
        if keep is not None:
            keep = torch.as_tensor(keep, device=advantages.device).reshape(
                (-1,) + (1,) * (advantages.dim() - 1)
            )
            out["advantages"] = torch.where(keep, advantages, torch.zeros_like(advantages))
        return out

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        """``GRPOTrainer.log``, with curriculum metrics that are not per batch at their latest.

        TRL logs the mean of each metric's values over the logging window (one value per
        generation batch). That is the window's mean for a per-batch metric, but for a running
        total or a snapshot it would be the mean of the values after each batch, below the
        total at the window's end; those keep only their last value.
        """
        if self.model.training:  # TRL's own test for the "train" metrics
            metrics = self._metrics["train"]
            for key, values in metrics.items():
                if key.startswith("curriculum/") and values and not per_batch(key):
                    metrics[key] = values[-1:]
        super().log(logs, start_time)

    def _save_checkpoint(self, model, trial) -> None:
        super()._save_checkpoint(model, trial)
        folder = os.path.join(
            self._get_output_dir(trial=trial), f"checkpoint-{self.state.global_step}"
        )
        self.save_curriculum(os.path.join(folder, "curriculum"))

    def save_curriculum(self, directory: str) -> None:
        """Writes the curriculum (Orbax) and the draws in flight (JSON) to ``directory``."""
        with self.curriculum_ledger.lock:
            self.curriculum.save(os.path.join(directory, "state"))
            draws = self.curriculum_ledger.state()
        write_json_atomic(os.path.join(directory, _DRAWS_FILE), draws)

    def load_curriculum(self, directory: str) -> None:
        """Restores what :meth:`save_curriculum` wrote."""
        if not os.path.isfile(os.path.join(directory, _DRAWS_FILE)):
            raise FileNotFoundError(
                f"no curriculum state in {directory}: the checkpoint was not written by "
                "CurriculumGRPOTrainer, or the run was stopped while saving it (resume from the "
                "checkpoint before it)"
            )
        with open(os.path.join(directory, _DRAWS_FILE)) as f:
            draws = json.load(f)
        with self.curriculum_ledger.lock:
            self.curriculum.restore(os.path.join(directory, "state"))
            self.curriculum_ledger.set_state(draws)

    def train(self, resume_from_checkpoint: str | bool | None = None, *args, **kwargs):
        """``GRPOTrainer.train``; a resumed run also restores the curriculum."""
        if resume_from_checkpoint is True:
            resume_from_checkpoint = self.last_checkpoint()
        if resume_from_checkpoint:
            self.load_curriculum(os.path.join(resume_from_checkpoint, "curriculum"))
        else:
            # A second train(): the loader's look-ahead draws from the last one were never
            # trained nor observed; hand them out first, so groups still arrive in draw order.
            self.curriculum_ledger.requeue()
        return super().train(resume_from_checkpoint or None, *args, **kwargs)

    def last_checkpoint(self) -> str:
        """The checkpoint ``train(resume_from_checkpoint=True)`` resumes from: the newest
        ``checkpoint-N`` in the output directory with its curriculum state. The curriculum is
        written after the trainer's own files: a run killed in between leaves a newer
        checkpoint without it, which is passed over with a warning (where none has it, the
        newest; :meth:`load_curriculum` refuses it).

        Raises:
          ValueError: the output directory holds no checkpoint.
        """
        out = self.args.output_dir
        last = get_last_checkpoint(out)
        if last is None:
            raise ValueError(f"no checkpoint found in {out}")
        # The folders get_last_checkpoint reads (checkpoint-N exactly), oldest first.
        steps = sorted(
            (int(m.group(1)), m.group(0))
            for m in map(re.compile(r"checkpoint-(\d+)").fullmatch, os.listdir(out))
            if m
        )
        whole = [
            os.path.join(out, name)
            for _, name in steps
            if os.path.isfile(os.path.join(out, name, "curriculum", _DRAWS_FILE))
        ]
        if not whole or whole[-1] == last:
            return last
        warnings.warn(
            f"{last} holds no curriculum state (the run was stopped while saving it): resuming "
            f"from {whole[-1]}, the newest checkpoint with one",
            stacklevel=3,
        )
        return whole[-1]

    def _set_signature_columns_if_needed(self) -> None:
        # With remove_unused_columns=True, Trainer keeps only these columns; the reward needs
        # the task ids too.
        super()._set_signature_columns_if_needed()
        field = self.curriculum_reward.task_field
        if field not in self._signature_columns:
            self._signature_columns = [*self._signature_columns, field]


def _with_task_ids(dataset: Any, field: str) -> Any:
    """The dataset with a ``field`` column holding each row's index (added if missing)."""
    n = len(dataset)
    names = getattr(dataset, "column_names", None)
    if names is None:
        raise ValueError("train_dataset must be a datasets.Dataset (it has no column_names)")
    if field not in names:
        return dataset.add_column(field, list(range(n)))
    if not np.array_equal(np.asarray(dataset[field]), np.arange(n)):
        raise ValueError(
            f"the {field!r} column must hold each row's index 0..{n - 1} (the curriculum's task "
            "ids); pass task_field= another name to keep yours"
        )
    return dataset
