"""The README's examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end >= 0 else None]


def test_build_loops_in_python_examples_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # they write lstm.onnx and encoder.onnx
    blocks = re.findall(r"```python\n(.*?)```", section("Build loops in Python"), re.DOTALL)
    assert len(blocks) == 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102  (our own README)
    assert namespace["y"].shape == (10, 2, 16) and namespace["h_n"].shape == (2, 16)
    assert (tmp_path / "lstm.onnx").exists() and (tmp_path / "encoder.onnx").exists()
