"""AppTest: what a share link's `hub=` (and the sidebar's hub-id field) opens on a public server.

A link holding a path (absolute, relative, `~`, `..`, a symlink to a real model directory, a
directory name that exists in the server's folder) opens nothing of it: one message, the same for
every path and naming none, and the server's own model opens instead. The hub is stubbed
(huggingface_hub.HfApi.model_info, snapshot_download) and every Translator.load is recorded."""
from __future__ import annotations

import shutil

import pytest

from atlas_ui.server import hub_policy
from atlas_ui.ui.common import escape_md
from atlas_ui.server.hub_policy import GB, NOT_A_MODEL_MESSAGE, OFF_MESSAGE, read_policy
from test_app import new_app
from test_hub_policy import info, not_found

SENTENCE = "red dog runs"
ALLOWED = "Helsinki-NLP/opus-mt-en-de"


@pytest.fixture
def server(tiny_dir, tmp_path, monkeypatch):
    """The operator's models folder (the tiny model as `xx-yy`), a real model directory elsewhere
    on the disk (`real`, `~/real`, a symlink `link` to it), the server's folder = tmp_path, and the
    stubbed hub. Returns a namespace with the recorded loads and hub calls."""
    models = tmp_path / "models"
    models.mkdir()
    shutil.copytree(tiny_dir, models / "xx-yy")
    shutil.copytree(tiny_dir, tmp_path / "real")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    monkeypatch.setenv("ATLAS_MODELS_DIR", str(models))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    for name in ("ATLAS_HUB", "ATLAS_HUB_MAX_GB", "ATLAS_MODELS", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr("transformer.hf.load._offline", lambda: False)

    import huggingface_hub
    from transformer import Translator
    from atlas_ui.runs.translation import get_translator
    calls = {"load": [], "model_info": [], "snapshot_download": []}
    original = Translator.load

    def load(cls, path, *args, **kwargs):
        calls["load"].append(str(path))
        return original(path, *args, **kwargs)

    def model_info(self, repo_id, **kwargs):             # the hub knows no model, unless a test says so
        calls["model_info"].append(repo_id)
        raise not_found()

    def snapshot_download(repo_id, **kwargs):
        calls["snapshot_download"].append(repo_id)
        raise AssertionError("a download was started")

    monkeypatch.setattr(Translator, "load", classmethod(load))
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", model_info)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    get_translator.clear()
    hub_policy._resolved.clear()
    yield dict(calls=calls, models=models, root=tmp_path)
    get_translator.clear()
    hub_policy._resolved.clear()


def opened(**params):
    at = new_app()
    at.query_params.update(params)
    at.run()
    return at


def errors(at) -> list[str]:
    return [e.value for e in at.error]


def translation_text(at) -> str:
    return at.main.text[0].value if at.main.text else ""


def only_the_operator_s_model_loaded(server) -> None:
    loads = server["calls"]["load"]
    assert loads and set(loads) == {str(server["models"] / "xx-yy")}, loads


def query(at) -> dict:
    return {key: (value[0] if isinstance(value, list) else value) for key, value in at.query_params.items()}


def test_a_link_with_any_kind_of_path_opens_nothing_and_gets_one_message(server):
    root = server["root"]
    links = [str(root / "real"), str(root / "link"), "~/real", f"../{root.name}/real", "./real", "real/",
             "/etc", "/no/such/dir", "real", "models/xx-yy"]
    seen = []
    for link in links:
        at = opened(hub=link, sentence=SENTENCE)
        assert not at.exception, (link, [e.value for e in at.exception])
        seen.append(errors(at))
        assert translation_text(at).strip(), f"{link}: the server's own model still translates"
    # one message, the same for every path, naming none ("real" and "models/xx-yy" look like hub ids:
    # the hub was asked about them, and the disk never was)
    assert seen == [[escape_md(NOT_A_MODEL_MESSAGE, 600)]] * len(links), seen
    assert all(root.name not in message and "etc" not in message for message in seen[0])
    only_the_operator_s_model_loaded(server)
    assert server["calls"]["model_info"] == ["real", "models/xx-yy"]
    assert server["calls"]["snapshot_download"] == []


def test_a_path_typed_in_the_field_is_refused_and_the_text_stays(server):
    at = opened(sentence=SENTENCE)
    assert not at.error and translation_text(at).strip()
    shown = []
    for typed in (str(server["root"] / "link"), "~/real"):
        at.text_input(key="hub_id").set_value(typed).run()
        assert not at.exception
        shown.append(errors(at))
        assert at.text_input(key="hub_id").value == typed                  # nothing the user typed is lost
    assert shown == [[escape_md(NOT_A_MODEL_MESSAGE, 600)]] * 2
    only_the_operator_s_model_loaded(server)


def test_a_model_over_the_cap_is_refused_before_it_downloads(server, monkeypatch):
    import huggingface_hub
    monkeypatch.setenv("ATLAS_HUB_MAX_GB", "2")
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda self, repo_id, **kwargs: info(
        {"config.json": 900, "model.safetensors": 50 * GB, "pytorch_model.bin": 50 * GB}))
    at = opened(hub="big-lab/huge-translator", sentence=SENTENCE)
    assert not at.exception
    assert errors(at) == [escape_md("That model's files are 50 GB, over the 2 GB this server opens.", 600)]
    assert server["calls"]["snapshot_download"] == []
    only_the_operator_s_model_loaded(server)
    assert translation_text(at).strip()


def test_an_allow_list_opens_its_ids_and_nothing_else(server, monkeypatch):
    import huggingface_hub
    monkeypatch.setenv("ATLAS_HUB", f"allow:{ALLOWED}")
    # the hub cache as snapshot_download leaves it; the tiny model stands in for opus-mt-en-de
    snapshot = server["root"] / "hf-cache" / "models--Helsinki-NLP--opus-mt-en-de" / "snapshots" / ("b" * 40)
    shutil.copytree(server["models"] / "xx-yy", snapshot)
    fetched = []
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", lambda self, repo_id, **kw: info({}, sha="b" * 40))
    monkeypatch.setattr(huggingface_hub, "snapshot_download",
                        lambda repo_id, **kwargs: fetched.append((repo_id, kwargs["revision"])) or str(snapshot))

    at = opened(hub="facebook/nllb-200-distilled-600M", sentence=SENTENCE)
    assert errors(at) == [escape_md(f"This server opens only these Hugging Face hub models: {ALLOWED}.", 600)]
    assert any(ALLOWED in c.value.replace("\\", "") for c in at.sidebar.caption), "the sidebar names the list"
    assert fetched == []
    only_the_operator_s_model_loaded(server)

    at = opened(hub=ALLOWED, sentence=SENTENCE)
    assert not at.exception and not at.error, errors(at)
    assert fetched == [(ALLOWED, "b" * 40)]
    assert server["calls"]["load"][-1] == str(snapshot)                # the cache's directory, not the text
    assert ALLOWED not in server["calls"]["load"]
    assert translation_text(at).strip()
    assert query(at)["hub"] == ALLOWED                                 # the share link names the id


def test_off_offers_no_field_and_a_hub_link_gets_the_refusal(server, monkeypatch):
    monkeypatch.setenv("ATLAS_HUB", "off")
    at = opened(hub=ALLOWED, sentence=SENTENCE)
    assert not at.exception
    assert errors(at) == [escape_md(OFF_MESSAGE, 600)]
    assert "hub_id" not in [widget.key for widget in at.text_input]
    assert any("turned the Hugging Face hub-id field off" in c.value.replace("\\", "") for c in at.sidebar.caption)
    assert translation_text(at).strip()
    assert "hub" not in query(at)                                      # refused once, then gone from the link
    only_the_operator_s_model_loaded(server)
    assert server["calls"]["model_info"] == [] and server["calls"]["snapshot_download"] == []
    at.text_area(key="text").set_value("blue cat sits").run()
    assert not at.error and translation_text(at).strip()
    assert read_policy({"ATLAS_HUB": "off"}).refusal() == OFF_MESSAGE
