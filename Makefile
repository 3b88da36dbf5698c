# Quick start:  make run   (creates .venv on first use, runs the main job in runs/grpo;
#                          again: continues an unfinished run, or says it is complete;
#                          make run RUN_ARGS=--overwrite starts over)
#               make test  (creates .venv on first use, runs the test suite)
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

# The trainer adapters' tests, each client in its own venv (make test skips them; these
# steps allow no skip: a missing dependency of tunix or TRL fails them):
#               make test-tunix  (.venv-tunix: curriculax[tunix])
#               make test-trl    (.venv-trl: CPU torch, then curriculax[trl])
VENV_TUNIX ?= .venv-tunix
VENV_TRL ?= .venv-trl
TORCH ?= torch==2.13.0
RUN_ARGS ?= --resume
# Test processes (pytest-xdist; each test file runs whole in one): 2 fit the 2-core CI box.
TEST_WORKERS ?= 2

.PHONY: run test test-tunix test-trl lint format bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/python -m experiments.grpo $(RUN_ARGS) $(ARGS)

# -rs lists every skip's reason; --skips=allowed fails the run on a skip not listed in
# tests/skip_policy.py (the adapters' tests, whose clients this venv does not install, and two
# tests that need root to mount a tmpfs or make a folder immutable);
# --durations=15 ends the log with the slowest tests (most of the time is XLA compiling).
test: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile -rs --skips=allowed --durations=15 $(ARGS)

$(VENV_TUNIX)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV_TUNIX)
	$(VENV_TUNIX)/bin/python -m pip install -q --upgrade pip
	$(VENV_TUNIX)/bin/python -m pip install -q -e '.[tunix]' 'pytest>=8'
	touch $@

test-tunix: $(VENV_TUNIX)/.installed
	$(VENV_TUNIX)/bin/python -m pytest -rs --skips=none tests/integrations/test_grain.py tests/integrations/test_tunix.py $(ARGS)

# torch first, so that trl does not pull the default (CUDA) build; $(TORCH) is the CPU wheel
# this machine's pip finds.
$(VENV_TRL)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV_TRL)
	$(VENV_TRL)/bin/python -m pip install -q --upgrade pip
	$(VENV_TRL)/bin/python -m pip install -q '$(TORCH)'
	$(VENV_TRL)/bin/python -m pip install -q -e '.[trl]' 'pytest>=8'
	touch $@

test-trl: $(VENV_TRL)/.installed
	$(VENV_TRL)/bin/python -m pytest -rs --skips=none tests/integrations/test_trl.py $(ARGS)

lint: $(STAMP)
	$(BIN)/ruff check curriculax experiments tests benchmarks notebooks
	$(BIN)/ruff format --check curriculax experiments tests benchmarks notebooks

format: $(STAMP)
	$(BIN)/ruff format curriculax experiments tests benchmarks notebooks
	$(BIN)/ruff check --fix curriculax experiments tests benchmarks notebooks

bench: $(STAMP)
	$(BIN)/python -m benchmarks.curriculum_step $(ARGS)

clean:
	rm -rf $(VENV) $(VENV_TUNIX) $(VENV_TRL) .pytest_cache .ruff_cache
