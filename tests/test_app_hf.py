"""AppTest checks with Hugging Face models in $ATLAS_MODELS_DIR (tiny Marian, T5 and NLLB built
offline by tests/hf_tiny.py): every view renders and shows a translation, T5's view of positions
says what it shows, a multilingual model gets language pickers, and bad models or hub ids give a
clear message while the app keeps working. Also: our own models say what they were trained on."""
from __future__ import annotations

import contextlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_app import MODELS, check_clean, new_app, open_inputs, specs
from atlas_ui.views import VIEWS

FAMILIES = ("marian", "t5", "nllb")
ROOT = Path(__file__).resolve().parent.parent
SENTENCE = "A man is riding a bike."


@pytest.fixture(scope="module")
def hf_models(hf_dirs, tmp_path_factory):
    """A models folder holding the three tiny models under their family names, and a BERT."""
    models = tmp_path_factory.mktemp("hf-models")
    for name in FAMILIES:
        hf_dirs.copy(name, models / name)
    bert = models / "bert"
    bert.mkdir()
    (bert / "config.json").write_text(json.dumps({"model_type": "bert", "architectures": ["BertModel"]}))
    return models


@pytest.mark.parametrize("loader", ["app", "library"])
def test_sessions_opening_different_models_at_once_all_get_them(hf_models, loader):
    """Three first loads of three Hugging Face models at once, in a fresh interpreter (`transformers`
    not imported yet), plus a multilingual model's language list: every load succeeds, through the
    app's cached loader and through Translator.load alone. Without transformer/hf/load.py's
    FROM_PRETRAINED_LOCK two runs in three failed: from_pretrained is not thread-safe."""
    load = ("get_translator(ModelRef(path), 'cpu')" if loader == "app" else "Translator.load(path, device='cpu')")
    code = f"""
import json, sys, threading
sys.path.insert(0, {str(ROOT)!r})
from atlas_ui.runs.translation import get_translator
from atlas_ui.runs.catalogue import ModelRef, language_options
from transformer import Translator
paths = [{str(hf_models / "marian")!r}, {str(hf_models / "nllb")!r}, {str(hf_models / "t5")!r}]
start, errors, families, codes = threading.Barrier(4), [], [], []
def load(path):
    start.wait()
    try:
        families.append({load}.engine.family)
    except Exception as exc:
        errors.append(repr(exc))
def languages():
    start.wait()
    try:
        codes.extend(language_options(paths[1])[0])
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=load, args=(path,)) for path in paths] + [threading.Thread(target=languages)]
[t.start() for t in threads]
[t.join() for t in threads]
print(json.dumps({{"families": sorted(families), "codes": len(codes), "errors": errors}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["errors"] == [], seen
    assert seen["families"] == ["m2m_100", "marian", "t5"] and seen["codes"] > 1, seen


@contextlib.contextmanager
def one_core_busy():
    """A busy loop on one core while the block runs, as on a loaded CI machine."""
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        spinner.kill()
        spinner.wait()


def test_first_uses_of_transformers_from_many_threads_on_a_busy_machine(hf_models):
    """Ten threads of a fresh interpreter reach transformers at once by every way a session can
    (config reads, the language list, a load, the adapter's class, the offline check), with one
    core kept busy. transformers' lazy names are not thread-safe: before transformer/hf/runtime.py
    the config reads failed with "cannot import name 'AutoConfig'" in 5 interpreters of 6. Three
    such interpreters run at once (one after another, the busy loop spun a core for three times
    as long; at once, they also keep each other's threads waiting for a core)."""
    code = f"""
import json, sys, threading
from pathlib import Path
sys.path.insert(0, {str(ROOT)!r})
from atlas_ui.runs.catalogue import language_options
import transformer.hf as hf
from transformer import Translator
from transformer.hf.load import _offline, read_config
paths = [Path(p) for p in {[str(hf_models / name) for name in FAMILIES]!r}]
calls = [lambda p=p: read_config(p).model_type for p in paths] * 2 + [
    lambda: language_options(str(paths[2]))[0][0], lambda: hf.HFEngine.__name__,
    lambda: Translator.load(paths[0], device="cpu").engine.family, lambda: _offline()]
start, errors, done = threading.Barrier(len(calls)), [], []
def run(call):
    start.wait()
    try:
        done.append(call())
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=run, args=(call,)) for call in calls]
[t.start() for t in threads]
[t.join() for t in threads]
print(json.dumps({{"done": len(done), "errors": errors}}))
"""
    runs = []
    try:
        with one_core_busy():
            for _ in range(3):
                runs.append(subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, text=True, cwd=ROOT))
            outs = [run.communicate(timeout=300) for run in runs]
    finally:
        for run in runs:                  # only on a failure (a timeout): none is left running
            if run.poll() is None:
                run.kill()
                run.wait()
    for run, (stdout, stderr) in zip(runs, outs):
        assert run.returncode == 0, stderr[-3000:]
        assert json.loads(stdout.strip().splitlines()[-1]) == {"done": 10, "errors": []}


def opened(monkeypatch, folder, **params):
    monkeypatch.setenv("ATLAS_MODELS_DIR", str(folder))
    at = new_app()
    at.query_params.update(params)
    at.run()
    return at


def translation_text(at) -> str:
    return at.main.text[0].value if at.main.text else ""


@pytest.mark.parametrize("family", FAMILIES)
def test_every_view_renders_with_a_hugging_face_model(hf_models, monkeypatch, family):
    at = opened(monkeypatch, hf_models, model=family, sentence=SENTENCE)
    check_clean(at, family)
    assert translation_text(at).strip(), "a translation is shown"
    assert any("Hugging Face model ·" in md.value for md in at.sidebar.markdown), "the panel says what the model is"
    for view in VIEWS:
        at.radio(key="view").set_value(view).run()
        check_clean(at, f"{family} · {view}")
        assert not at.warning, f"{family} · {view}: {[w.value for w in at.warning]}"
        if view == "Beam":                 # greedy has no beam: the view offers to switch
            open_inputs(at).button(key="beam_switch").click().run()     # the decoding radio: in the popover
            check_clean(at, f"{family} · beam search")
        if view == "Ablation":             # nothing is ablated until a head is ticked
            at.session_state["ablation_picker_open"] = True            # its popover: drawn while open
            at.run()
            at.button(key="ablate_all_cross_0").click().run()
            check_clean(at, f"{family} · ablation")
        assert specs(at), f"{family} · {view}: no chart"
        if view == "Beam":
            at.radio(key="decoding").set_value("Greedy").run()
    if family == "t5":
        at.radio(key="view").set_value("Positional encodings").run()
        assert any("no positional encoding" in i.value for i in at.info)
        titles = [s["layout"]["title"]["text"] for s in specs(at)]
        assert any("Relative position bias" in t for t in titles), titles


def test_multilingual_model_gets_language_pickers(hf_models, monkeypatch):
    at = opened(monkeypatch, hf_models, model="nllb", sentence=SENTENCE)
    check_clean(at, "nllb")
    source, target = at.selectbox(key="source_lang"), at.selectbox(key="target_lang")
    assert source.value in source.options and target.value in target.options
    assert source.value != target.value and source.value not in target.options
    first = translation_text(at)
    other = next(code for code in target.options if code != target.value)
    target.set_value(other).run()
    check_clean(at, "nllb, other target")
    from transformer import Translator
    expected = Translator.load(str(hf_models / "nllb"), device="cpu", source_lang=source.value,
                               target_lang=other).translate(SENTENCE, capture=False).text
    assert translation_text(at) == expected
    assert first != "" and at.query_params.get("model") in ("nllb", ["nllb"])
    # the share link holds the pair, and opening it gives the same pair and translation
    query = {key: (value[0] if isinstance(value, list) else value) for key, value in at.query_params.items()}
    assert query["src"] == source.value and query["tgt"] == other
    again = opened(monkeypatch, hf_models, **query)
    check_clean(again, "nllb share link")
    assert again.selectbox(key="target_lang").value == other and translation_text(again) == expected


def test_bad_models_and_an_offline_hub_id_say_what_is_wrong(hf_models, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    at = opened(monkeypatch, hf_models, model="bert", sentence=SENTENCE)
    assert not at.exception
    assert any("bert" in e.value.lower() and "encoder" in e.value.lower() for e in at.error), \
        [e.value for e in at.error]
    at.text_area(key="text").set_value("Two dogs play.").run()           # the input is still there
    assert at.text_area(key="text").value == "Two dogs play."
    at.selectbox(key="model").set_value("marian").run()
    check_clean(at, "back to marian")
    assert translation_text(at).strip()
    at.text_input(key="hub_id").set_value("Helsinki-NLP/opus-mt-en-de").run()
    assert not at.exception
    errors = [e.value.replace("\\", "") for e in at.error]          # shown Markdown-escaped
    assert any("opus-mt-en-de" in e and "offline" in e for e in errors), errors
    at.text_input(key="hub_id").set_value("").run()
    check_clean(at, "hub id cleared")


@pytest.mark.skipif("en-de" not in MODELS, reason="needs pretrained/en-de")
def test_our_model_says_what_it_was_trained_on_and_flags_unknown_text():
    at = new_app()
    at.query_params.update(model="en-de", sentence="The meeting was postponed because of the strike.")
    at.run()
    check_clean(at, "out of domain")
    assert any("image captions" in md.value for md in at.sidebar.markdown)
    notes = [i.value for i in at.info if "outside what it knows" in i.value]
    assert notes and "opus-mt-en-de" in notes[0]
    at.text_area(key="text").set_value("Two dogs play in the snow.").run()
    check_clean(at, "caption")
    assert not [i.value for i in at.info if "outside what it knows" in i.value]


def test_at_most_a_few_models_stay_loaded(tiny_dir, tmp_path):
    """The app's model cache keeps MAX_LOADED_MODELS translators; older ones are freed."""
    import gc
    import weakref

    from atlas_ui.runs.translation import get_translator
    from atlas_ui.runs.catalogue import ModelRef
    from atlas_ui.server.settings import MAX_LOADED_MODELS
    get_translator.clear()
    alive = []
    for index in range(MAX_LOADED_MODELS + 2):
        folder = tmp_path / f"copy-{index}"
        shutil.copytree(tiny_dir, folder)
        alive.append(weakref.ref(get_translator(ModelRef(str(folder)), "cpu")))
    gc.collect()
    loaded = [ref() is not None for ref in alive]
    assert sum(loaded) == MAX_LOADED_MODELS, loaded
    assert loaded[-MAX_LOADED_MODELS:] == [True] * MAX_LOADED_MODELS      # the most recent ones stay
    get_translator.clear()
