"""The README's code snippet runs as written."""

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
