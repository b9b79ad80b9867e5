"""Every import the public API shows works as written: the app, the benchmarks and outside checks
copy these lines. docs/api.md is the repository's own page; ../shared/docs/api.md, the contract it
is based on, is checked too where this checkout has it."""
import importlib
import re

import pytest

from conftest import REPO

PAGES = [page for page in (REPO / "docs" / "api.md", REPO.parent / "shared" / "docs" / "api.md") if page.is_file()]
IMPORT = re.compile(r"^from ([\w.]+) import ([\w, ]+?)\s*(?:#.*)?$")


def _imports() -> list[tuple[str, str]]:
    text = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    found = []
    for block in blocks:
        for line in block.splitlines():
            match = IMPORT.match(line.strip())
            if match:
                found += [(match.group(1), name.strip()) for name in match.group(2).split(",") if name.strip()]
    return sorted(set(found))


def test_the_api_document_shows_imports():
    assert PAGES[0] == REPO / "docs" / "api.md"
    assert ("transformer", "Translator") in _imports() and ("transformer.patching", "PatchRun") in _imports()


@pytest.mark.parametrize("module, name", _imports())
def test_each_import_the_api_shows_works(module, name):
    assert hasattr(importlib.import_module(module), name), f"from {module} import {name}"
