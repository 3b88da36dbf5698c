"""``python -m experiments.compare``."""

from experiments.compare.cli import main

main()
