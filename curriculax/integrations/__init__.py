"""Adapters that let a curriculum choose the tasks of someone else's training loop.

One module per client, each imported only when used (``import curriculax`` never imports a
client), each an optional extra:

- :mod:`curriculax.integrations.grain`: a ``grain.IterDataset`` whose batches a
  :class:`curriculax.HostCurriculum` chooses, checkpointed as grain's iterator state plus the
  curriculum's Orbax item (``pip install curriculax[grain]``);
- :mod:`curriculax.integrations.tunix`: tunix's GRPO learners (``curriculax[tunix]``);
- :mod:`curriculax.integrations.trl`: TRL's ``GRPOTrainer`` (``curriculax[trl]``).

Every adapter follows one rule for checkpoints: what the curriculum drew but the trainer has
not finished (observed) yet is saved and handed out again first after a restore, so a resumed
run draws what the uninterrupted run would have, and the trainer's own fast-forward over
already-trained batches is turned off (it would draw from the curriculum without feedback).

:class:`DrawLedger` is that bookkeeping, public for loops without an adapter: it draws from a
:class:`curriculax.HostCurriculum`, matches finished groups back to their draws, and its
``state()`` holds the draws in flight (see docs/integrations.md, "Any other loop"). It needs
numpy only, so importing this package imports no client.
"""

from curriculax.integrations._ledger import DrawLedger

__all__ = ["DrawLedger"]
