"""``write_atomic``: a file is replaced whole or left as it was."""

import os

import pytest

from curriculax._files import write_atomic, write_json_atomic, write_text_atomic


def test_a_failed_write_leaves_the_file_as_it_was(tmp_path):
    path = tmp_path / "summary.json"
    write_json_atomic(str(path), {"a": 1}, sort_keys=True)
    assert path.read_text() == '{"a": 1}'

    def cut_short(f):
        f.write('{"a": ')
        raise OSError("No space left on device")

    with pytest.raises(OSError, match="No space left"):
        write_atomic(str(path), cut_short)
    assert path.read_text() == '{"a": 1}'
    with pytest.raises(TypeError):
        write_json_atomic(str(path), {"a": object()})
    assert path.read_text() == '{"a": 1}'
    assert os.listdir(tmp_path) == ["summary.json"]  # no temporary file left behind


def test_text_and_binary_writes(tmp_path):
    write_text_atomic(str(tmp_path / "t.md"), "table\n")
    write_atomic(str(tmp_path / "b.bin"), lambda f: f.write(b"\x00\x01"), binary=True)
    assert (tmp_path / "t.md").read_text() == "table\n"
    assert (tmp_path / "b.bin").read_bytes() == b"\x00\x01"
