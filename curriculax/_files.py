"""Files written whole or not at all."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from typing import IO, Any


def write_atomic(path: str, write: Callable[[IO], Any], *, binary: bool = False) -> None:
    """Writes ``path`` whole or not at all: ``write(f)`` fills a temporary file beside it,
    which is flushed to disk and renamed over ``path``. A failure (in ``write``, a full disk, a
    kill) leaves ``path`` as it was, and the temporary file is removed where it can be.

    Args:
        path: The file to write (its folder must exist).
        write: Called once with the open temporary file.
        binary: Open the temporary file in binary mode (text mode otherwise).
    """
    # The process id and a random part: two writers of one path never share a temporary file.
    tmp = f"{path}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp"
    try:
        with open(tmp, "wb" if binary else "w") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def write_text_atomic(path: str, text: str) -> None:
    """Writes ``text`` to ``path`` whole or not at all (:func:`write_atomic`)."""
    write_atomic(path, lambda f: f.write(text))


def write_json_atomic(path: str, data: Any, **dump_kwargs) -> None:
    """Writes ``data`` as JSON (``json.dump`` with ``dump_kwargs``) to ``path`` whole or not at
    all (:func:`write_atomic`). The text is made before the file is opened, so data that cannot
    be written as JSON leaves no trace."""
    write_text_atomic(path, json.dumps(data, **dump_kwargs))
