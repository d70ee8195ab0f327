"""README's Python example runs as written, from the repository root, and prints what it
says it prints."""

import contextlib
import io
import os
import re

from conftest import ROOT


def test_the_readme_example_runs():
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Python") :]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    assert len(code.strip().splitlines()) <= 12
    out = io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    printed = out.getvalue()
    assert "borrowed_gpu: ok" in printed
    assert "switch chips" in printed
    assert "borrower_ram" in printed and "published_value" in printed
