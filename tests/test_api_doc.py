"""Every import the public API (../shared/docs/api.md) shows works as written: the app, the
benchmarks and outside checks copy these lines."""
import importlib
import re

import pytest

from conftest import REPO

API = REPO.parent / "shared" / "docs" / "api.md"
IMPORT = re.compile(r"^from ([\w.]+) import ([\w, ]+?)\s*(?:#.*)?$")


def _imports() -> list[tuple[str, str]]:
    text = API.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    found = []
    for block in blocks:
        for line in block.splitlines():
            match = IMPORT.match(line.strip())
            if match:
                found += [(match.group(1), name.strip()) for name in match.group(2).split(",") if name.strip()]
    return found


def test_the_api_document_shows_imports():
    assert ("transformer", "Translator") in _imports() and len(_imports()) >= 5


@pytest.mark.parametrize("module, name", _imports())
def test_each_import_the_api_shows_works(module, name):
    assert hasattr(importlib.import_module(module), name), f"from {module} import {name}"
