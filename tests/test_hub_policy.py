"""atlas_ui/server/hub_policy.py: what the sidebar's hub-id field and a share link's `hub=` may open.

Offline: the hub is monkeypatched (huggingface_hub.HfApi.model_info and snapshot_download), and
every test checks that a refused text touched neither the hub nor the loader."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from atlas_ui.server import hub_policy
from atlas_ui.server.hub_policy import (GB, NOT_A_MODEL_MESSAGE, OFF_MESSAGE, HubPolicy, HubRefused, download_size,
                                 hub_name, is_hub_id, open_hub, read_policy)

ALLOWED = "Helsinki-NLP/opus-mt-en-de"


def paths(tmp_path, monkeypatch) -> list[str]:
    """Every kind of path a link could hold; most of them lead to a real model directory."""
    real = tmp_path / "real"
    real.mkdir()
    (real / "config.json").write_text('{"model_type": "marian"}')
    (tmp_path / "link").symlink_to(real)
    (tmp_path / "models" / "xx-yy").mkdir(parents=True)
    (tmp_path / "models" / "xx-yy" / "config.json").write_text("{}")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return [str(real), str(tmp_path / "link"), "~/real", "~", "../" + tmp_path.name + "/real", "./real",
            "/etc", "/etc/passwd", "/no/such/dir", "real/../real", "..", ".", "/", ".cache/x", "real/",
            "C:\\Windows", "file:///etc", "real\n", "a/b/c", "\u00e4/real", "real real"]


@pytest.fixture
def hub(monkeypatch):
    """The hub, stubbed: records every call; nothing is reached."""
    calls = {"model_info": [], "snapshot_download": []}

    def model_info(self, repo_id, **kwargs):
        calls["model_info"].append((repo_id, kwargs))
        raise AssertionError("the hub was asked")

    def snapshot_download(repo_id, **kwargs):
        calls["snapshot_download"].append((repo_id, kwargs))
        raise AssertionError("a download was started")

    import huggingface_hub
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", model_info)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.setattr("transformer.hf.load._offline", lambda: False)
    hub_policy._resolved.clear()
    yield calls
    hub_policy._resolved.clear()


def not_found():
    from huggingface_hub.errors import RepositoryNotFoundError
    error = RepositoryNotFoundError.__new__(RepositoryNotFoundError)
    Exception.__init__(error, "404 Repository Not Found")
    return error


def info(files: dict, sha: str = "0" * 40):
    from huggingface_hub.hf_api import RepoSibling
    return SimpleNamespace(sha=sha, siblings=[RepoSibling(rfilename=name, size=size) for name, size in files.items()])


@pytest.mark.parametrize("value, mode, allowed", [
    ("", "any", ()), ("any", "any", ()), (" ANY ", "any", ()), ("off", "off", ()),
    (f"allow:{ALLOWED}, Helsinki-NLP/opus-mt-de-en ,t5-small", "allow",
     (ALLOWED, "Helsinki-NLP/opus-mt-de-en", "t5-small")),
    (f"allow:/etc,{ALLOWED},../x,~/m", "allow", (ALLOWED,)),   # paths never get on the list
    ("allow:", "off", ()), ("allow:/etc", "off", ()),            # nothing left: off
    ("anything", "off", ()), ("any:x", "off", ()), ("on", "off", ()), ("1", "off", ()),   # a typo: off
])
def test_the_operator_s_setting_is_read_and_a_typo_means_off(value, mode, allowed):
    policy = read_policy({"ATLAS_HUB": value})
    assert (policy.mode, policy.allowed) == (mode, allowed)
    assert policy.enabled == (mode != "off")


@pytest.mark.parametrize("value, expected", [("", 3 * GB), ("0.5", GB // 2), ("12", 12 * GB), ("0", 3 * GB),
                                             ("-1", 3 * GB), ("big", 3 * GB), ("inf", 3 * GB), ("nan", 3 * GB)])
def test_the_size_cap(value, expected):
    assert read_policy({"ATLAS_HUB": "any", "ATLAS_HUB_MAX_GB": value}).max_bytes == expected


@pytest.mark.parametrize("text", [ALLOWED, "t5-small", "facebook/nllb-200-distilled-600M", "google/mt5.v1",
                                  "a", "A_b/c.d-e", "x" * 96 + "/" + "y" * 96])
def test_hub_ids_are_hub_ids(text):
    assert is_hub_id(text)


@pytest.mark.parametrize("text", ["", "/etc", "/", "~", "~/x", "~root/x", ".", "..", "../x", "./x", "x/..",
                                  "x/../y", "a..b", ".hidden", "x/.y", "x/", "/x", "x/y/z", "x//y", "a--b",
                                  "x/y.git", "x y", "x\n", "\u00e4", "x\\y", "C:\\x", "file:///etc", "x:y",
                                  "-x", "x-", "x" * 97, None, 3])
def test_paths_and_anything_else_are_not(text):
    assert not is_hub_id(text)


@pytest.mark.parametrize("setting", ["off", "any", f"allow:{ALLOWED}"])
def test_every_path_is_refused_with_one_message_before_the_disk_or_the_hub(setting, tmp_path, monkeypatch, hub):
    policy = read_policy({"ATLAS_HUB": setting})
    asked = []

    def model_info(self, repo_id, **kwargs):        # the hub knows none of them
        asked.append(repo_id)
        raise not_found()
    monkeypatch.setattr(__import__("huggingface_hub").HfApi, "model_info", model_info)
    messages = set()
    for text in paths(tmp_path, monkeypatch):
        with pytest.raises(HubRefused) as refused:
            open_hub(policy, text)
        messages.add(str(refused.value))
    assert messages == {policy.refusal()}, messages
    (message,) = messages
    assert tmp_path.name not in message and "real" not in message and "etc" not in message
    assert hub["snapshot_download"] == []
    # only a text that is a hub id ("real\n" is "real") ever reaches the hub, and only when any id may
    assert asked == (["real"] if setting == "any" else [])


def test_an_existing_directory_named_like_a_hub_id_is_asked_of_the_hub_not_opened(tmp_path, monkeypatch, hub):
    """`models/xx-yy` exists in the server's folder, and looks like owner/name: the hub is asked, says
    it has no such model, and the refusal is the same as for a name that exists nowhere."""
    paths(tmp_path, monkeypatch)
    asked = []

    def model_info(self, repo_id, **kwargs):
        asked.append(repo_id)
        raise not_found()
    monkeypatch.setattr(__import__("huggingface_hub").HfApi, "model_info", model_info)
    policy = read_policy({"ATLAS_HUB": "any"})
    refusals = []
    for text in ("models/xx-yy", "real", "models/nothing-here", "nothing-here"):
        with pytest.raises(HubRefused) as refused:
            open_hub(policy, text)
        refusals.append(str(refused.value))
    assert refusals == [NOT_A_MODEL_MESSAGE] * 4
    assert asked == ["models/xx-yy", "real", "models/nothing-here", "nothing-here"]
    assert hub["snapshot_download"] == []


def test_off_refuses_everything_and_touches_nothing(hub):
    policy = read_policy({"ATLAS_HUB": "off"})
    for text in (ALLOWED, "/etc", ""):
        with pytest.raises(HubRefused, match="operator turned the hub-id field off"):
            open_hub(policy, text)
    assert policy.refusal() == OFF_MESSAGE and "turned" in policy.describe()
    assert hub == {"model_info": [], "snapshot_download": []}


def test_an_id_not_on_the_allow_list_is_refused_and_the_list_is_named(hub):
    policy = read_policy({"ATLAS_HUB": f"allow:{ALLOWED},t5-small"})
    for text in ("facebook/nllb-200-distilled-600M", "helsinki-nlp/opus-mt-en-de", "Helsinki-NLP/opus-mt-en-fr"):
        with pytest.raises(HubRefused) as refused:
            open_hub(policy, text)
        assert str(refused.value) == f"This server opens only these Hugging Face hub models: {ALLOWED}, t5-small."
    assert hub == {"model_info": [], "snapshot_download": []}


def test_an_allowed_id_is_downloaded_at_the_revision_the_hub_named(hub, monkeypatch, tmp_path):
    import huggingface_hub
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info",
                        lambda self, repo_id, **kw: info({"model.safetensors": 300 * 2 ** 20}, sha="a" * 40))
    downloads = []
    snapshot = tmp_path / "hub" / "models--Helsinki-NLP--opus-mt-en-de" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)

    def snapshot_download(repo_id, **kwargs):
        downloads.append((repo_id, kwargs))
        return str(snapshot)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    policy = read_policy({"ATLAS_HUB": f"allow:{ALLOWED}"})
    assert open_hub(policy, f"  {ALLOWED} ") == snapshot
    assert open_hub(policy, ALLOWED) == snapshot                    # once per process
    assert len(downloads) == 1
    repo_id, kwargs = downloads[0]
    assert repo_id == ALLOWED and kwargs["revision"] == "a" * 40
    assert kwargs["allow_patterns"] == ["*.json", "*.safetensors", "*.model", "*.spm", "*.txt"]
    assert not kwargs.get("local_files_only")
    assert hub_name(snapshot) == ALLOWED and hub_name(tmp_path) is None


def test_a_model_over_the_cap_is_refused_before_anything_downloads(hub, monkeypatch):
    import huggingface_hub
    asked = []

    def model_info(self, repo_id, **kwargs):
        asked.append(kwargs)
        return info({"config.json": 1000, "model-00001.safetensors": 2 * GB, "model-00002.safetensors": 2 * GB,
                     "pytorch_model.bin": 8 * GB})
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info", model_info)
    policy = read_policy({"ATLAS_HUB": "any", "ATLAS_HUB_MAX_GB": "3"})
    with pytest.raises(HubRefused) as refused:
        open_hub(policy, "big/model")
    assert str(refused.value) == "That model's files are 4 GB, over the 3 GB this server opens."
    assert asked and asked[0]["files_metadata"] is True and asked[0]["timeout"] > 0
    assert hub["snapshot_download"] == []                           # nothing downloaded, nothing cached


def test_the_size_counts_only_the_files_that_would_be_downloaded():
    files = {"config.json": 1, "model.safetensors": 10, "source.spm": 100, "vocab.txt": 1000,
             "sub/dir/tokenizer.json": 10000, "spiece.model": 100000, "pytorch_model.bin": 10 ** 9,
             "tf_model.h5": 10 ** 9, "flax_model.msgpack": 10 ** 9, "README.md": 10 ** 9}
    assert download_size(info(files)) == 111111
    assert download_size(info({"model.safetensors": None})) is None          # unknown: not guessed


def test_a_size_the_hub_does_not_give_is_refused(hub, monkeypatch):
    import huggingface_hub
    monkeypatch.setattr(huggingface_hub.HfApi, "model_info",
                        lambda self, repo_id, **kw: info({"model.safetensors": None}))
    with pytest.raises(HubRefused, match="did not give the size"):
        open_hub(read_policy({"ATLAS_HUB": "any"}), "some/model")
    assert hub["snapshot_download"] == []


def test_offline_an_id_that_is_not_cached_fails_at_once_and_says_so(monkeypatch, hub):
    import huggingface_hub
    monkeypatch.setattr("transformer.hf.load._offline", lambda: True)
    cache_lookups = []

    def snapshot_download(repo_id, **kwargs):
        cache_lookups.append(kwargs)
        raise FileNotFoundError("not cached")
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    with pytest.raises(FileNotFoundError, match="offline") as failed:
        open_hub(read_policy({}), ALLOWED)
    assert ALLOWED in str(failed.value)
    assert hub["model_info"] == [] and [kw.get("local_files_only") for kw in cache_lookups] == [True]


def test_offline_a_cached_model_opens_but_the_cap_still_holds(monkeypatch, hub, tmp_path):
    import huggingface_hub
    monkeypatch.setattr("transformer.hf.load._offline", lambda: True)
    snapshot = tmp_path / "snapshot"
    snapshot.mkdir()
    (snapshot / "model.safetensors").write_bytes(b"\0" * 4096)
    monkeypatch.setattr(huggingface_hub, "snapshot_download",
                        lambda repo_id, **kw: str(snapshot) if kw.get("local_files_only") else None)
    assert open_hub(read_policy({"ATLAS_HUB": "any"}), ALLOWED) == snapshot
    with pytest.raises(HubRefused, match="over the"):
        open_hub(HubPolicy("any", max_bytes=1024), ALLOWED)
    assert hub["model_info"] == []


def test_the_command_line_sets_the_policy_and_rejects_a_bad_one(capsys):
    from atlas_ui.server.cli import build_command
    _, env = build_command(["--hub", f"allow:{ALLOWED}", "--hub-max-gb", "1.5"], environ={})
    assert env["ATLAS_HUB"] == f"allow:{ALLOWED}" and env["ATLAS_HUB_MAX_GB"] == "1.5"
    assert read_policy(env) == HubPolicy("allow", (ALLOWED,), int(1.5 * GB))
    _, env = build_command([], environ={})
    assert "ATLAS_HUB" not in env
    for bad in (["--hub", "allow:/etc"], ["--hub", "sometimes"], ["--hub-max-gb", "0"]):
        with pytest.raises(SystemExit):
            build_command(bad, environ={})
        assert "--hub" in capsys.readouterr().err
