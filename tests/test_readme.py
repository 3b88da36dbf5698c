"""The README's code snippet runs as written, and its TOML sampler tables build."""

import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_ten_line_example_runs():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    block = re.search(r"## A curriculum in ten lines\n\n```python\n(.*?)```", text, re.S).group(1)
    scope: dict = {}
    exec(compile(block, "README.md", "exec"), scope)
    assert scope["admitted"].shape == (256,) and scope["admitted"].dtype == bool
    metrics = scope["cur"].metrics()
    assert metrics["groups"] == 3 * 256
    assert "gate/zero_advantage/rejected" in metrics and "sampler/pool/hard" in metrics


def test_the_toml_sampler_tables_build():
    import tomllib

    import numpy as np

    import curriculax as cx

    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    block = re.search(r"```toml\n(\[sampler\]\s+# defaults spelled out.*?)```", text, re.S)
    tables = re.split(r"\n\n", block.group(1).strip())
    assert len(tables) == 4
    levels = np.arange(100) % 5
    for table in tables:
        # the alternatives are commented out so the block stays one valid TOML table
        text = "\n".join(line.removeprefix("# ") for line in table.splitlines())
        config = tomllib.loads(text)
        cur = cx.curriculum_from_config(config, 100, categories=levels)
        assert isinstance(cur, cx.Curriculum)
    defaults = tomllib.loads(tables[0])["sampler"]
    import inspect

    params = inspect.signature(cx.samplers.learnability).parameters
    for key, value in defaults.items():
        if key != "type":
            expected = params[key].default
            assert value == (list(expected) if isinstance(expected, tuple) else expected), key
