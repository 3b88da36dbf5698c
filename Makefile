# Quick start:  make run   (creates .venv on first use, runs the main job)
#               make test  (creates .venv on first use, runs the test suite)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint format bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/python -m experiments.grpo $(ARGS)

test: $(STAMP)
	$(BIN)/python -m pytest $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check curriculax experiments tests benchmarks
	$(BIN)/ruff format --check curriculax experiments tests benchmarks

format: $(STAMP)
	$(BIN)/ruff format curriculax experiments tests benchmarks
	$(BIN)/ruff check --fix curriculax experiments tests benchmarks

bench: $(STAMP)
	$(BIN)/python -m benchmarks.curriculum_step $(ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache runs
