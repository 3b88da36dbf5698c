"""``python -m experiments.compare``."""

from experiments import _cli
from experiments.compare.cli import main

_cli.entry(main)
