"""tunix: a curriculum chooses the prompts of tunix's GRPO learners.

tunix's ``RLLearner.train`` takes any iterable of batch dicts with a ``"prompts"`` field; extra
fields reach the reward and metric functions. So:

- **prompts**: a :class:`~curriculax.integrations.grain.CurriculumDataset` (records with a
  ``"prompts"`` field, looked up by task id) hands tunix batches the curriculum chose, with the
  ids in a ``"task_id"`` field;
- **observe**: :class:`CurriculumObserver` is a tunix metric function. tunix calls it once per
  generated batch with every rollout's summed reward and advantage, rows laid out group by group
  (each prompt's ``num_generations`` rollouts in a row); it feeds every group to the curriculum
  and logs the curriculum's metrics under ``curriculum/``;
- **gates**: tunix cannot drop a group from a batch (its batch shapes are fixed, and its DAPO
  ``dynamic_sampling`` is a TODO), so :class:`CurriculumLearner` makes a rejected group carry
  no policy gradient by zeroing its advantages (``gates="zero_advantages"``, the default), or
  only logs the votes (``gates="log"``). The observer hands the gates zero advantages for a
  group whose rewards are all equal (tunix's own are a float residue there, e.g. -2.8e-11
  for three rewards of 0.2), so a zero-advantage gate rejects exactly those groups and
  zeroing removes the residue tunix would train on; for any other gate zeroing
  removes the group's policy-gradient term; the group still counts in the loss's
  normalisation and in the KL penalty (``beta``), and no other group takes its place (no
  backfill), unlike our engine;
- **checkpoints**: when tunix checkpoints (``checkpoint_root_directory``), the learner saves
  the curriculum beside it at the same step (tunix writes ``<root>/actor``, the learner
  ``<root>/curriculum``: grain iterator state plus the curriculum's Orbax item) and restores it
  with tunix's restore. tunix resumes by fast-forwarding the data iterator past the batches
  already trained, which would draw from the curriculum without feedback; the learner turns
  that off, since the restored iterator continues where the run stopped. The resumed run
  draws and trains what the uninterrupted one would have when the checkpoint falls between
  two draws: tunix trains ``(batch_size // mini_batch_size) * num_iterations`` optimiser steps
  on each draw, so save every multiple of that (1 by default) with
  ``save_decision_policy=ocp.checkpoint_managers.FixedIntervalPolicy(n)`` (Orbax adds a save
  of step 1 to ``save_interval_steps``). The learner warns when it saves
  or restores a step inside a draw.

Example (tunix's usual set-up for ``rl_cluster``; see docs/integrations.md):
  >>> import curriculax as cx
  >>> from curriculax.integrations.grain import CurriculumDataset
  >>> from curriculax.integrations.tunix import CurriculumGRPOLearner
  >>> cur = cx.HostCurriculum(cx.curriculum(cx.samplers.difficulty_pools(len(records)),
  ...     gates={"zero_advantage": cx.gates.advantage_range(0.0, 0.0)}))
  >>> learner = CurriculumGRPOLearner(rl_cluster=rl_cluster, algo_config=grpo_config,
  ...     reward_fns=reward_fn, prompts=CurriculumDataset(cur, records, batch_size=8))
  >>> learner.train()

Without the learner subclass, a stock ``GRPOLearner`` observes through the metric function
alone (gates logged only, no curriculum checkpoints):
``it = iter(dataset); GRPOLearner(..., metric_fns=[CurriculumObserver(it, G)]).train(it)``.
"""

from __future__ import annotations

import os
import threading
import warnings
from typing import Any

import jax.numpy as jnp
import numpy as np
from tunix.rl import rl_cluster as rl_cluster_lib
from tunix.rl.grpo.grpo_learner import GRPOLearner

from curriculax._checks import int_at_least
from curriculax.integrations._ledger import (
    GATES,
    answers_of,
    check_answer_key,
    check_gates,
    per_batch,
    rows_to_keep,
    split_groups,
)
from curriculax.integrations.grain import (
    CurriculumCheckpoints,
    CurriculumDataset,
    CurriculumIterator,
)

__all__ = ["GATES", "CurriculumGRPOLearner", "CurriculumLearner", "CurriculumObserver"]


class CurriculumObserver:
    """A tunix metric function that feeds every finished group to the curriculum.

    tunix calls it as ``fn(prompts=, completions=, advantages=, rewards=, **fields)`` with the
    rows of one generated batch (``rewards``/``advantages``: ``float[B * G]``, each prompt's
    ``G`` rollouts in a row). Batches without the task-id field (an evaluation set) are not
    observed. The curriculum gets tunix's advantages, but zero for a group whose rewards are
    all equal (exactly: tunix's are a float residue there, see the module docstring).

    Args:
      iterator: the :class:`~curriculax.integrations.grain.CurriculumIterator` tunix trains
        from.
      num_generations: rollouts per prompt (tunix's ``GRPOConfig.num_generations``).
      answer_key: ``answer_key(completion) -> answer`` (e.g. the final answer your verifier
        reads), or None. Given, each rollout's answer id (from the answer's text) goes to the
        curriculum with its reward, for the ``reward_consistency`` sampler and gate. It must
        capture everything the summed reward depends on: a format bonus makes equal extracted
        answers earn different rewards, which the check reads as a contradiction (return e.g.
        ``(answer, well_formatted)``). ``None`` means no answer: each such rollout gets an id
        of its own.

    The metrics go to tunix with their aggregation over a step's batches: the mean for a
    per-batch metric (``admission_rate``, a gate's ``admit_rate``, ``zero_variance_share``),
    the value after the step's last batch for every other one (running totals, snapshots).

    Attributes:
      enabled: observe at all (a learner turns it off during evaluation).
      last_admitted: ``np.bool_[B]`` the admission of the last batch observed (None if the
        last call observed nothing).

    Both attributes are per thread: tunix may score a training batch in its data thread while
    the main thread evaluates, and each sees only its own.
    """

    def __init__(
        self, iterator: CurriculumIterator, num_generations: int, *, answer_key: Any = None
    ):
        if not isinstance(iterator, CurriculumIterator):
            raise TypeError(
                "CurriculumObserver takes the iterator tunix trains from: "
                f"it = iter(CurriculumDataset(...)); got {type(iterator).__name__}"
            )
        self.iterator = iterator
        self.num_generations = int_at_least(num_generations, "num_generations", 2)
        self.answer_key = check_answer_key(answer_key)
        self._local = threading.local()
        self.__name__ = "curriculum"

    @property
    def enabled(self) -> bool:
        return getattr(self._local, "enabled", True)

    @enabled.setter
    def enabled(self, value: bool) -> None:
        self._local.enabled = bool(value)

    @property
    def last_admitted(self) -> np.ndarray | None:
        return getattr(self._local, "last_admitted", None)

    @last_admitted.setter
    def last_admitted(self, value: np.ndarray | None) -> None:
        self._local.last_admitted = value

    def __call__(self, prompts, completions, advantages, rewards, **fields) -> dict[str, Any]:
        self.last_admitted = None
        ids = fields.get(self.iterator.dataset.task_field)
        if not self.enabled or ids is None:
            return {}
        ids, rewards, advantages, answers = split_groups(
            ids,
            self.num_generations,
            np.asarray(rewards),
            np.asarray(advantages, np.float32),
            answers_of(self.answer_key, completions),
        )
        # tunix's GRPO advantage is (r - mean) / (std + 1e-6): where a group's rewards are all
        # equal their mean is not always equal to them, and tunix gives every rollout the
        # residue (-2.8e-11 for three 0.2s). Such a group carries no signal: the gates see its
        # advantages as zero, decided exactly on the rewards tunix normalised (before a cast).
        same = (rewards == rewards[:, :1]).all(axis=1)
        advantages = np.where(same[:, None], np.float32(0), advantages)
        admitted = self.iterator.observe(
            ids, rewards.astype(np.float32), advantages=advantages, answers=answers
        )
        self.last_admitted = admitted
        out = {}
        for name, value in self.iterator.curriculum.metrics().items():
            key = f"curriculum/{name}"
            out[key] = (value, np.mean if per_batch(key) else _last)
        return out


class CurriculumLearner:
    """Mixin that lets a curriculum choose a tunix GRPO-family learner's prompts.

    Put it before the learner class: ``class MyLearner(CurriculumLearner, DAPOLearner)``
    (:class:`CurriculumGRPOLearner` is the one for ``GRPOLearner``). It takes the learner's
    arguments plus the keywords below, adds a :class:`CurriculumObserver` to its metric
    functions, applies the gates, saves the curriculum with tunix's checkpoints and restores it
    with tunix's restore. Train with ``learner.train()`` (or ``train(eval_ds=...)``).

    Args:
      prompts: the :class:`~curriculax.integrations.grain.CurriculumDataset` to train on.
      gates: one of :data:`GATES`: ``"zero_advantages"`` (default) or ``"log"``.
      answer_key: see :class:`CurriculumObserver`.

    Attributes:
      curriculum_iterator: the iterator tunix trains from (its curriculum:
        ``.curriculum``).
      curriculum_observer: the metric function that observes.
      curriculum_checkpoints: the
        :class:`~curriculax.integrations.grain.CurriculumCheckpoints` beside tunix's (None when
        tunix does not checkpoint).

    Raises:
      FileNotFoundError: tunix restored a checkpoint at a step the curriculum has none for.
      ValueError: the curriculum directory holds checkpoints but tunix restored none.

    Warns:
      UserWarning: tunix saved (first time only) or restored a checkpoint inside a draw, at a
        step that is not a multiple of ``(batch_size // mini_batch_size) * num_iterations``:
        a run resumed there trains part of a draw twice or skips passes over it.
    """

    def __init__(
        self,
        *args,
        prompts: CurriculumDataset,
        gates: str = "zero_advantages",
        answer_key: Any = None,
        **kw,
    ):
        if not isinstance(prompts, CurriculumDataset):
            raise TypeError(f"prompts must be a CurriculumDataset, got {type(prompts).__name__}")
        check_gates(gates)
        check_answer_key(answer_key)
        super().__init__(*args, **kw)
        self.gates = gates
        self.curriculum_iterator = iter(prompts)
        self.curriculum_observer = CurriculumObserver(
            self.curriculum_iterator, self.algo_config.num_generations, answer_key=answer_key
        )
        self.metric_fns = [*self.metric_fns, self.curriculum_observer]
        self.curriculum_checkpoints = self._attach_checkpoints()
        # tunix fast-forwards the iterator past the micro-batches trained before its
        # checkpoint (``_iter_steps < _last_iter_step``); the restored iterator already
        # continues there, so mark those steps as done instead.
        self._iter_steps = self._last_iter_step

    def _attach_checkpoints(self) -> CurriculumCheckpoints | None:
        trainer = self.rl_cluster.actor_trainer
        config = self.rl_cluster.cluster_config.training_config
        root = config.checkpoint_root_directory  # tunix saves the actor in <root>/actor
        if root is None:
            return None
        options = config.checkpointing_options
        keep = getattr(options, "max_to_keep", 3) if options is not None else 3
        ckpt = CurriculumCheckpoints(os.path.join(root, "curriculum"), max_to_keep=keep)
        step = trainer.train_steps
        if step > 0:
            ckpt.restore(self.curriculum_iterator, step=step)
            self._warn_inside_draw(step, "restored", stacklevel=4)  # the learner's caller
        elif ckpt.steps():
            raise ValueError(
                f"{ckpt.directory} holds curriculum checkpoints (steps {ckpt.steps()}) but tunix "
                f"restored no model checkpoint from {root} (another run's, or one killed during "
                "its first checkpoint); delete it to start afresh"
            )
        manager = trainer.checkpoint_manager
        tunix_save = manager.save
        iterator = self.curriculum_iterator

        warned = False  # once per learner

        def save(step, *args, force=False, **kwargs):
            # The curriculum first: tunix commits its save in the background, and a kill after
            # that commit but before the curriculum's left a model step with no curriculum (a
            # run no resume could continue). A kill now leaves a curriculum step newer than
            # tunix's, which a resume from tunix's step does not read and later writes over.
            nonlocal warned
            orbax = getattr(manager, "_checkpoint_manager", None)
            first = orbax is not None and (force or orbax.should_save(step))
            if first:
                ckpt.save(step, iterator)
            saved = tunix_save(step, *args, force=force, **kwargs)
            if saved and not first:  # tunix decided otherwise (a policy that reads the clock)
                ckpt.save(step, iterator)
            if saved:
                warned = warned or self._warn_inside_draw(step, "saved", stacklevel=3)
            return saved

        manager.save = save
        return ckpt

    def _steps_per_draw(self) -> int:
        """Optimiser steps tunix trains on one draw: ``(batch_size // mini_batch_size) *
        num_iterations``. A checkpoint is exact at a multiple of it."""
        config = self.rl_cluster.cluster_config.training_config
        batch = self.curriculum_iterator.dataset.batch_size
        mini = config.mini_batch_size or batch
        return max(batch // mini, 1) * self._num_iterations()

    def _warn_inside_draw(self, step: int, done: str, stacklevel: int) -> bool:
        """Warns (and returns True) when ``step`` falls inside a draw: resuming there is not
        exact (docs/integrations.md, "Exact resume" for tunix)."""
        every = self._steps_per_draw()
        if step % every == 0:
            return False
        batch = self.curriculum_iterator.dataset.batch_size
        mini = self.rl_cluster.cluster_config.training_config.mini_batch_size or batch
        passes = self._num_iterations()
        effects = []
        if batch // mini > 1:
            effects.append(
                "trains the draw in flight again from its start (the groups trained before the "
                "save are trained and observed twice)"
            )
        if passes > 1:
            effects.append(
                "skips the passes left over the last generations (tunix does not save them)"
            )
        warnings.warn(
            f"tunix {done} a checkpoint at step {step}, inside a draw: each batch of {batch} "
            f"prompts trains {every} optimiser steps (batch_size {batch} // mini_batch_size "
            f"{mini} x num_iterations {passes}), so a run resumed there is not the "
            f"uninterrupted one: it {', or '.join(effects)}. Checkpoint every multiple of "
            f"{every} steps for an exact resume: checkpointing_options="
            "ocp.CheckpointManagerOptions(save_decision_policy=ocp.checkpoint_managers."
            f"FixedIntervalPolicy({every})) (save_interval_steps alone also saves step 1)",
            stacklevel=stacklevel,
        )
        return True

    def _generate_and_compute_advantage(
        self, training_input, mode: rl_cluster_lib.Mode = rl_cluster_lib.Mode.TRAIN
    ):
        observer = self.curriculum_observer
        observer.enabled = mode == rl_cluster_lib.Mode.TRAIN
        try:
            example = super()._generate_and_compute_advantage(training_input, mode)
        finally:
            observer.enabled = True
        keep = rows_to_keep(
            self.gates,
            observer.last_admitted,
            self.algo_config.num_generations,
            example.advantages.shape[0],
        )
        if keep is not None:
            example = example.replace(advantages=jnp.where(keep, example.advantages, 0.0))
        return example

    def train(self, train_ds: Any = None, eval_ds: Any = None, skip_jit: bool = False) -> None:
        """Trains on the curriculum's prompts (``train_ds`` must be None or that iterator)."""
        if train_ds is not None and train_ds is not self.curriculum_iterator:
            raise ValueError(
                "a CurriculumLearner trains on the prompts its curriculum chooses; call "
                "train() or train(eval_ds=...)"
            )
        return super().train(self.curriculum_iterator, eval_ds, skip_jit)


class CurriculumGRPOLearner(CurriculumLearner, GRPOLearner):
    """tunix's ``GRPOLearner`` with a curriculum choosing its prompts (see
    :class:`CurriculumLearner`): ``CurriculumGRPOLearner(rl_cluster=..., algo_config=...,
    reward_fns=..., prompts=CurriculumDataset(...), gates="zero_advantages")``."""


def _last(values: np.ndarray) -> Any:
    """tunix's aggregation for a running total or snapshot: its value after the step's last
    batch (tunix hands the step's values in the order they were logged)."""
    return values[-1]
