"""Every Python block of README.md and docs/*.md runs as written, the TOML tables build, and
docs/metrics.md names every metric the built-ins report.

A block runs in a fresh scope, in a temporary working directory (blocks that write
``runs/...`` write there). A block that names what the reader supplies (their solver, their
challenger's callables) gets stand-ins from :data:`STAND_INS`, and a block whose sizes would
take minutes has them shrunk by :data:`SHRINK`, both documented there. A block that cannot run
in this environment is listed in :data:`RUN_ELSEWHERE` with the test that runs it. Any other
block, new or moved, runs: a block in no list is run as it is.
"""

from __future__ import annotations

import glob
import inspect
import os
import re
import tomllib

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = ["README.md", *sorted(os.path.relpath(p, ROOT) for p in glob.glob(f"{ROOT}/docs/*.md"))]


def python_blocks() -> list[tuple[str, int, str]]:
    """``(file, line, code)`` of every fenced ``python`` block in the docs."""
    out = []
    for name in DOCS:
        with open(os.path.join(ROOT, name)) as f:
            text = f.read()
        for m in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M):
            out.append((name, text.count("\n", 0, m.start()) + 1, m.group(1)))
    return out


# Blocks that need a client this venv does not have; the named test runs them there.
RUN_ELSEWHERE = {
    "from curriculax.integrations.tunix import CurriculumGRPOLearner": (
        "needs tunix: tests/integrations/test_tunix.py::test_the_readme_example_runs "
        "(make test-tunix)"
    ),
    "from curriculax.integrations.trl import CurriculumGRPOTrainer": (
        "needs TRL: tests/integrations/test_trl.py::test_the_readme_example_runs (make test-trl)"
    ),
}


def _selfplay_stand_ins() -> dict:
    # The deterministic toy of curriculax.selfplay.toy, as the self-play dry run uses it.
    from curriculax.selfplay.toy import capped_solver, level_challenger, level_tasks

    toy = level_challenger()
    return {
        "solver": capped_solver(),
        "seed_tasks": level_tasks(),
        "generate": toy.generate,
        "validate": toy.validate,
        "propose": toy.propose,
        "initial_spec": {"level": 2.0},
    }


def _component_stand_ins() -> dict:
    # "Your own component": a built-in sampler and gate stand in for the reader's.
    import curriculax as cx

    return {"my_sampler": cx.samplers.uniform, "my_gate": lambda: cx.gates.advantage_range()}


# Names a block leaves to the reader, keyed by a line of the block.
STAND_INS = {
    "result = curriculum_evolve(solver, seed_tasks": _selfplay_stand_ins,
    "check_sampler(my_sampler(1000), num_tasks=1000)": _component_stand_ins,
}

# Sizes shrunk so the block takes seconds, keyed by a line of the block: (as written, as run).
SHRINK = {
    # the engine tour: 50 updates, a checkpoint every 25 -> 6 updates, one every 3
    "result = run(engine, steps=50": [
        ("steps=50, run_dir", "steps=6, run_dir"),
        ("checkpoint_every=25", "checkpoint_every=3"),
    ],
    # self-play: 6 rounds of 15 updates -> 2 rounds of 4
    "result = curriculum_evolve(solver, seed_tasks": [
        ("rounds=6, steps_per_round=15", "rounds=2, steps_per_round=4"),
    ],
}


def _check_ten_lines(scope: dict) -> None:
    assert scope["admitted"].shape == (256,) and scope["admitted"].dtype == bool
    metrics = scope["cur"].metrics()
    assert metrics["groups"] == 3 * 256
    assert "gate/zero_advantage/rejected" in metrics and "sampler/pool/hard" in metrics


def _check_config(scope: dict) -> None:
    import curriculax as cx

    assert isinstance(scope["cur"], cx.Curriculum)
    assert set(scope["cur"].gates) == {"zero_advantage"}


def _check_engine(scope: dict) -> None:
    result = scope["result"]
    assert result.stopped == "completed" and result.summary["steps"] == 6
    assert os.path.isfile(os.path.join("runs", "q", "metrics.jsonl"))


def _check_selfplay(scope: dict) -> None:
    result = scope["result"]
    assert len(result.curriculum) == 2
    assert 0.0 <= result.final_reward <= 1.0


def _check_ledger(scope: dict) -> None:
    assert scope["admitted"].shape == (16,) and scope["admitted"].dtype == bool
    # the replayed draw is in flight again (not yet observed), the observed one is not
    assert scope["ledger"].state()["in_flight"] == [scope["ahead"].tolist()]


# What each block must have produced, keyed by a line of the block; a block not listed must
# run without raising.
CHECKS = {
    "admitted = cur.observe(ids, rewards)": _check_ten_lines,
    "cur = cx.curriculum_from_config({": _check_config,
    "result = run(engine, steps=50": _check_engine,
    "result = curriculum_evolve(solver, seed_tasks": _check_selfplay,
    "ahead = ledger.draw(16)": _check_ledger,
}


def _entry(table: dict, code: str):
    hits = [key for key in table if key in code]
    assert len(hits) <= 1, hits
    return table[hits[0]] if hits else None


BLOCKS = python_blocks()
RUN_HERE = [b for b in BLOCKS if _entry(RUN_ELSEWHERE, b[2]) is None]


@pytest.mark.parametrize("name,line,code", RUN_HERE, ids=[f"{n}:{i}" for n, i, _ in RUN_HERE])
def test_every_python_block_runs(name, line, code, tmp_path, monkeypatch):
    for written, run in _entry(SHRINK, code) or []:
        assert code.count(written) == 1, f"{name}:{line} no longer holds {written!r}"
        code = code.replace(written, run)
    scope = (_entry(STAND_INS, code) or dict)()
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"{name}:{line}", "exec"), scope)
    check = _entry(CHECKS, code)
    if check is not None:
        check(scope)


def test_every_list_names_a_block():
    """A key that matches no block (the block was edited or removed) fails here, so the lists
    cannot go stale, and every block the README ran before the docs moved, plus the two it
    skipped (the config dict and the engine tour), is among the blocks that run here."""
    codes = [code for _, _, code in BLOCKS]
    for table in (RUN_ELSEWHERE, STAND_INS, SHRINK, CHECKS):
        for key in table:
            hits = sum(key in c for c in codes)
            assert hits == 1, f"{key!r} matches {hits} blocks"
    for key in ("admitted = cur.observe(ids, rewards)", *CHECKS):
        assert any(key in c for _, _, c in RUN_HERE), key


def test_the_toml_sampler_tables_build():
    import curriculax as cx

    texts = []
    for name in DOCS:
        with open(os.path.join(ROOT, name)) as f:
            texts.append(f.read())
    blocks = [
        m.group(1)
        for text in texts
        for m in re.finditer(r"```toml\n(\[sampler\]\s+# defaults spelled out.*?)```", text, re.S)
    ]
    assert len(blocks) == 1, f"{len(blocks)} TOML blocks of sampler tables in {DOCS}"
    tables = re.split(r"\n\n", blocks[0].strip())
    assert len(tables) == 5
    levels = np.arange(100) % 5
    for table in tables:
        # the alternatives are commented out so the block stays one valid TOML table
        text = "\n".join(line.removeprefix("# ") for line in table.splitlines())
        config = tomllib.loads(text)
        cur = cx.curriculum_from_config(config, 100, categories=levels)
        assert isinstance(cur, cx.Curriculum)
    defaults = tomllib.loads(tables[0])["sampler"]
    params = inspect.signature(cx.samplers.learnability).parameters
    for key, value in defaults.items():
        if key != "type":
            expected = params[key].default
            assert value == (list(expected) if isinstance(expected, tuple) else expected), key


def test_the_metrics_reference_names_every_key():
    """docs/metrics.md documents every metric a built-in curriculum reports (band and category
    names written as ``<band>`` / ``<c>``, a wrapper's inner metrics as the inner sampler's)."""
    import jax

    import curriculax as cx

    with open(os.path.join(ROOT, "docs", "metrics.md")) as f:
        text = f.read()
    s, n = cx.samplers, 16
    samplers = [
        s.sequential(n),
        s.uniform(n),
        s.difficulty_pools(n, score_half_life=1.0),
        s.learnability(n),
        s.category_bandit(n, np.arange(n) % 4),
        s.category_bandit(n, np.arange(n) % 4, reward="advantage_progress"),
        s.learning_progress(n),
        s.category_learnability(n, np.arange(n) % 4),
        s.floor(n, s.uniform(n), staleness_share=0.1),
        s.skip_zero_variance(n, s.difficulty_pools(n)),
        s.reward_consistency(n, s.learnability(n)),
        s.hierarchical_learnability(n, np.arange(n) % 4),
    ]
    keys = set()
    for sampler in samplers:
        cur = cx.curriculum(sampler, gates={"g": cx.gates.advantage_range()})
        keys |= set(cur.metrics(cur.init(jax.random.key(0))))
    for key in sorted(keys):
        name = re.sub(r"^(sampler/(inner/)?|gate/g/)", "", key)
        name = re.sub(r"^pool/(hard|medium|easy)$", "pool/<band>", name)
        name = re.sub(r"^(q|prob|reliability|noise|category_pass_rate)/\d+$", r"\1/<c>", name)
        assert f"`{name}`" in text, f"docs/metrics.md does not document {key!r} (as `{name}`)"


def _table_rows_off_their_header(text: str) -> list[tuple[int, int, int]]:
    """``(line, header cells, row cells)`` of every markdown table row outside fenced blocks
    whose count of cells differs from its header's (an unescaped ``|`` in a cell splits it,
    and the renderer drops the cells past the header's)."""
    out = []
    header = None
    fenced = False
    for i, line in enumerate(text.split("\n"), 1):
        line = line.strip()  # a table may sit indented in a list item
        if line.startswith(("```", "~~~")):
            fenced = not fenced
        if fenced or not line.startswith("|"):
            header = None
            continue
        cells = len(re.findall(r"(?<!\\)\|", line))
        if header is None:
            header = cells
        elif cells != header:
            out.append((i, header, cells))
    return out


def test_every_markdown_table_row_has_its_headers_cells():
    files = DOCS + sorted(
        os.path.relpath(p, ROOT)
        for pattern in ("docs/*/*.md", "docs/*/*/*.md", "benchmarks/*.md")
        for p in glob.glob(f"{ROOT}/{pattern}")
    )
    bad = {}
    for name in files:
        with open(os.path.join(ROOT, name)) as f:
            rows = _table_rows_off_their_header(f.read())
        if rows:
            bad[name] = rows
    assert not bad, f"table rows whose cells differ from the header's ((line, header, row)): {bad}"
