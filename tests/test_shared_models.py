"""conftest's TinyModels (the `hf_dirs` fixture): each family is built once, on first use; a copy is
free to change; a change to a shared directory is caught. Checked with a stand-in builder, so no
model is built here."""
from __future__ import annotations

import pytest

import hf_tiny
from conftest import TinyModels


@pytest.fixture
def stand_in(monkeypatch):
    calls = []

    def build(name, root, steps=40):
        calls.append(name)
        folder = root / f"{name}-src" / name
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(f'{{"model_type": "{name}"}}')
        return folder
    monkeypatch.setattr(hf_tiny, "build", build)
    return calls


def test_each_family_is_built_once_on_first_use(stand_in, tmp_path):
    models = TinyModels(tmp_path)
    assert stand_in == [] and list(models) == list(hf_tiny.BUILDERS) and len(models) == 6
    first = models["marian"]
    assert models["marian"] == first and models["t5"] != first
    assert stand_in == ["marian", "t5"]
    with pytest.raises(KeyError):
        models["gpt2"]
    assert models.languages("nllb") == ("eng_Latn", "deu_Latn") and models.languages("bart") == (None, None)


def test_another_worker_reads_the_family_the_first_one_built(stand_in, tmp_path):
    """Two TinyModels over one run folder, as two pytest-xdist workers have: the second reads what
    the first built and builds nothing."""
    first, second = TinyModels(tmp_path), TinyModels(tmp_path)
    assert second["nllb"] == first["nllb"] and stand_in == ["nllb"]


def test_a_copy_is_free_to_change_and_a_changed_original_is_caught(stand_in, tmp_path):
    models = TinyModels(tmp_path / "run")
    (tmp_path / "run").mkdir()
    copy = models.copy("t5", tmp_path / "t5")
    (copy / "config.json").write_text('{"model_type": "t5", "changed": true}')
    (copy / "extra.json").write_text("{}")
    assert models.changed() == [] and stand_in == ["t5"]
    (models["t5"] / "config.json").write_text('{"model_type": "t5", "changed": 1}')
    assert models.changed() == ["t5"]
