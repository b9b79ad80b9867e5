"""Shared fixtures. The tiny model is trained here in seconds on a generated reverse task,
so the model-core tests need neither the shipped models nor the Multi30k data."""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import random
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

# pytest-xdist workers share the machine's cores (pytest.ini): one torch thread each on two cores,
# where two threads a worker would spin against each other
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
torch.set_num_threads(int(os.environ.get("ATLAS_TEST_THREADS", str(max(1, 2 // WORKERS)))))

# The device every Translator the fixtures build runs on: cpu unless ATLAS_TEST_DEVICE names another
# (`ATLAS_TEST_DEVICE=cuda pytest` runs the suite's models on the GPU; tests read it as `tr.device`)
TEST_DEVICE = os.environ.get("ATLAS_TEST_DEVICE", "cpu")

WORDS = ["red", "blue", "green", "dog", "cat", "man", "runs", "sits", "big", "small",
         "tree", "ball", "river", "girl", "jumps", "old"]


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pytest.ini): one worker a core, at most four. Each worker has its own app servers,
    Chromium and models; more than four would mostly add their start-up."""
    return max(1, min(4, len(os.sched_getaffinity(0))))


# ---- markers: `-m "not browser and not hf and not slow"` runs the fast tests ----------------------
BROWSER_FIXTURES = {"browser", "pages", "app_url"}      # Chromium through Playwright, an app server
HF_FIXTURES = {"hf_dirs"}                        # the tiny Hugging Face models of tests/hf_tiny.py
SLOW_MODULES = {"test_analyze", "test_cli", "test_pretrained", "test_server_process", "test_serving",
                "test_training"}                 # corpus runs, servers, training: seconds a test
SLOW_TESTS = {                                   # single tests of other modules, 4-50 s each
    "test_asgi.py::test_app_py_is_the_servers_application_when_imported_and_the_page_in_a_script_run",
    "test_contrastive.py::test_ours_matches_finite_differences_through_the_models_forward",
    "test_decoding.py::test_beam_size_one_equals_greedy",
    "test_decoding.py::test_translate_batch_matches_translate",
    "test_diagnosis.py::test_bad_inputs_give_a_result_or_a_clear_message",
    "test_diagnosis.py::test_batched_equals_one_at_a_time",
    "test_diagnosis.py::test_bf16_passes_stay_close_to_float32",
    "test_diagnosis.py::test_cli_writes_jsonl_and_resumes",
    "test_diagnosis.py::test_threads_give_identical_results",
    "test_explain.py::test_alti_parts_sum_to_each_block_output_of_the_model",
    "test_explain.py::test_explanation_describes_the_run",
    "test_explain.py::test_perturbation_and_rank_correlation",
    "test_explain.py::test_shapes_dtypes_and_default_off",
    "test_hf_loading.py::test_an_unreachable_hub_fails_fast",
    "test_language_check.py::test_shipped_profile_is_what_the_build_writes",
    "test_prefix.py::test_a_prefix_of_max_len_minus_one_pieces_leaves_one_step",
    "test_prefix.py::test_a_prefix_of_max_len_pieces_is_the_whole_translation",
    "test_prefix.py::test_another_prefix_decodes_on_greedily_and_steps_carry_the_models_probabilities",
    "test_prefix.py::test_beam_with_a_prefix",
    "test_prefix.py::test_diagnose_passes_through_with_a_prefix",
    "test_prefix.py::test_captured_attention_is_a_teacher_forced_recomputation",
    "test_prefix.py::test_explain_with_a_prefix_describes_the_output",
    "test_prefix.py::test_prefix_errors_and_empty_prefix",
    "test_prefix.py::test_prefix_of_greedys_own_start_gives_plain_greedy",
}


def pytest_collection_modifyitems(config, items):
    """Mark each test by what it needs (pytest.ini describes the markers): `browser` for the
    test_browser* modules and anything using Chromium or an app server, `hf` for anything using
    the tiny Hugging Face models, `slow` for AppTest runs of the whole app (test_app* modules and any
    module using test_app's new_app), SLOW_MODULES and SLOW_TESTS."""
    for item in items:
        module = item.path.stem
        fixtures = set(getattr(item, "fixturenames", ()))
        named = f"{item.path.name}::{getattr(item, 'originalname', item.name)}"
        if module.startswith("test_browser") or fixtures & BROWSER_FIXTURES:
            item.add_marker(pytest.mark.browser)
        if fixtures & HF_FIXTURES:
            item.add_marker(pytest.mark.hf)
        app_test = module.startswith("test_app") or hasattr(getattr(item, "module", None), "new_app")
        if app_test or module in SLOW_MODULES or named in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)


def random_sentences(n: int, seed: int, min_len: int = 3, max_len: int = 8) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(min_len, max_len))) for _ in range(n)]


def reverse(sentence: str) -> str:
    return " ".join(reversed(sentence.split()))


@contextlib.contextmanager
def one_thread():
    """Torch on one thread for a while. Tiny models train on one: at d_model 32-64 a second thread
    mostly waits, and on a machine whose cores are shared 40 steps of train_tiny took 360 s on two
    threads against 10-30 s on one. The weights then do not depend on ATLAS_TEST_THREADS either."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def train_tiny(norm_first: bool = True, steps: int = 450, seed: int = 0, tie: bool = True):
    """Train a 2+2-layer model to reverse word sequences (on one thread). Returns (translator, losses)."""
    from transformer.config import ModelConfig
    from transformer.training.data import collate, token_batches
    from transformer.model import Transformer
    from transformer.tokenizer import Tokenizer
    from transformer.training.train import learning_rate, train_step
    from transformer.translator import Translator

    torch.manual_seed(seed)
    sentences = random_sentences(3000, seed)
    tokenizer = Tokenizer.train(sentences + [reverse(s) for s in sentences[:200]], vocab_size=40,
                                seed_sentencepiece_size=1000)
    cfg = ModelConfig(vocab_size=len(tokenizer), d_model=64, n_heads=4, n_encoder_layers=2,
                      n_decoder_layers=2, d_ff=128, dropout=0.0, norm_first=norm_first,
                      tie_embeddings=tie, source_lang="xx", target_lang="yy")
    model = Transformer(cfg)
    source = [ids + [3] for ids in tokenizer.encode_batch(sentences)]
    target = tokenizer.encode_batch([reverse(s) for s in sentences])
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.98), eps=1e-9)
    generator = torch.Generator().manual_seed(seed)
    losses, step = [], 0
    with one_thread():
        while step < steps:
            for batch in token_batches(source, target, 800, generator):
                step += 1
                loss, _ = train_step(model, optimizer, *collate(batch, source, target), label_smoothing=0.0,
                                     clip=1.0, lr=learning_rate(step, 3e-3, 100))
                losses.append(loss)
                if step >= steps:
                    break
    model.eval()
    return Translator(model, tokenizer, card={"name": "tiny reverse"}, device=TEST_DEVICE), losses


@pytest.fixture(scope="session")
def tiny(tmp_path_factory):
    """The tiny reverse model (train_tiny), trained once a run: the first pytest-xdist worker to
    need it trains it and writes it in float32, every worker loads those files (an exact round trip)."""
    from transformer import Translator
    from transformer.checkpoint import save_model_dir
    root = run_folder(tmp_path_factory)
    folder, losses_file = root / "tiny-reverse", root / "tiny-reverse-losses.json"
    with file_lock(root / "tiny-reverse.lock"):
        if not losses_file.exists():
            trained, losses = train_tiny()
            save_model_dir(folder, trained.engine.model, trained.engine.tokenizer, card={"name": "tiny reverse"},
                           dtype=torch.float32)
            losses_file.write_text(json.dumps(losses))
    translator = Translator.load(folder, device=TEST_DEVICE)
    translator.train_losses = json.loads(losses_file.read_text())
    return translator


@pytest.fixture(scope="session")
def tiny_dir(tiny, tmp_path_factory):
    """The tiny model written as a model directory (fp32 so round trips are exact)."""
    from transformer.checkpoint import save_model_dir
    path = tmp_path_factory.mktemp("models") / "xx-yy"
    save_model_dir(path, tiny.engine.model, tiny.engine.tokenizer, card={"name": "tiny reverse", "scores": {}},
                   dtype=torch.float32)
    return path


@pytest.fixture(scope="module")
def translator():
    """The app's default model (pretrained/en-de, or the first in $ATLAS_MODELS_DIR), loaded once
    per module, so that what one module does to it no other module sees."""
    from atlas_ui.runs.catalogue import find_models
    from atlas_ui.server.settings import DEFAULT_MODEL, models_dir
    from transformer import Translator
    models = find_models(str(models_dir()))
    return Translator.load(models[DEFAULT_MODEL if DEFAULT_MODEL in models else next(iter(models))], device=TEST_DEVICE)


def _pretrained(name: str):
    from transformer import Translator
    return Translator.load(REPO / "pretrained" / name, device=TEST_DEVICE)


@pytest.fixture(scope="module")
def en_de():
    """Our shipped en-de model on TEST_DEVICE, loaded once per module (what one module does to it no other sees)."""
    return _pretrained("en-de")


@pytest.fixture(scope="module")
def de_en():
    """Our shipped de-en model on the CPU, loaded once per module."""
    return _pretrained("de-en")


# ---- tiny Hugging Face models: each family built once a session, on first use ------------------
def _stamp(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(f.relative_to(folder)): (f.stat().st_size, f.stat().st_mtime_ns)
            for f in sorted(folder.rglob("*")) if f.is_file()}


def run_folder(tmp_path_factory) -> Path:
    """A temporary folder for this whole test run: under pytest-xdist the workers' shared parent of
    their own base folders (unique to the run), else the run's base folder."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def file_lock(path: Path):
    """One process at a time in the block (the pytest-xdist workers of one run)."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class TinyModels(Mapping):
    """The tiny Hugging Face model directories of tests/hf_tiny.py by family name, each built on its
    first use and shared by the whole run: by every pytest-xdist worker too (the first to need a
    family builds it, the others wait for it and read the same files). They are read-only: a test
    that changes a model's files works on `copy(name, dest)`, and each module loads its own
    Translators (`load(name)`, a fraction of a second), so that what one test does to a model never
    depends on the order tests run in. `changed()` names any directory whose files differ from what
    was built; every test checks it."""

    def __init__(self, root: Path, log: list | None = None):
        """root: where the families are built (run_folder for the suite's models)."""
        import hf_tiny
        self._root, self._hf_tiny, self._log = Path(root), hf_tiny, log
        self._built: dict[str, Path] = {}
        self._stamps: dict[str, dict] = {}

    def __getitem__(self, name: str) -> Path:
        if name not in self._built:
            if name not in self._hf_tiny.BUILDERS:
                raise KeyError(name)
            built = self._root / f"hf-{name}.path"        # the family's model folder, once it is built
            with file_lock(self._root / f"hf-{name}.lock"):    # the other pytest-xdist workers wait for it
                if built.exists():
                    folder = Path(built.read_text())
                else:
                    started = time.perf_counter()
                    (self._root / f"hf-{name}").mkdir()
                    folder = self._hf_tiny.build(name, self._root / f"hf-{name}")
                    built.write_text(str(folder))
                    if self._log is not None:
                        self._log.append((name, time.perf_counter() - started))
            self._built[name], self._stamps[name] = folder, _stamp(folder)
        return self._built[name]

    def __iter__(self):
        return iter(self._hf_tiny.BUILDERS)

    def __len__(self) -> int:
        return len(self._hf_tiny.BUILDERS)

    def languages(self, name: str) -> tuple[str | None, str | None]:
        return self._hf_tiny.LANGUAGES.get(name, (None, None))

    def load(self, name: str, **kwargs):
        """A fresh Translator over the shared directory, in the family's languages unless given."""
        from transformer import Translator
        source, target = self.languages(name)
        kwargs = {"device": TEST_DEVICE, "source_lang": source, "target_lang": target, **kwargs}
        return Translator.load(self[name], **kwargs)

    def copy(self, name: str, dest: Path) -> Path:
        """A private copy of the model directory at `dest`, free to change."""
        return Path(shutil.copytree(self[name], dest))

    def changed(self) -> list[str]:
        return [name for name, folder in self._built.items() if _stamp(folder) != self._stamps[name]]


_TINY_MODELS: list[TinyModels] = []
TINY_BUILDS: list[tuple[str, float]] = []          # (family, seconds) of every build this run


@pytest.fixture(scope="session")
def hf_dirs(tmp_path_factory) -> TinyModels:
    """{family: tiny model directory}, one build per family per run (see TinyModels)."""
    models = TinyModels(run_folder(tmp_path_factory), log=TINY_BUILDS)
    _TINY_MODELS.append(models)
    yield models
    _TINY_MODELS.remove(models)


def pytest_sessionfinish(session):
    output = getattr(session.config, "workeroutput", None)
    if output is not None:                       # a pytest-xdist worker: its builds go to the controller
        output["tiny_builds"] = json.dumps(TINY_BUILDS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    TINY_BUILDS.extend(tuple(build) for build in json.loads(getattr(node, "workeroutput", {}).get("tiny_builds", "[]")))


def pytest_terminal_summary(terminalreporter):
    if TINY_BUILDS:
        builds = ", ".join(f"{name} {seconds:.0f} s" for name, seconds in TINY_BUILDS)
        terminalreporter.write_line(f"tiny Hugging Face models built: {len(TINY_BUILDS)} ({builds})")


@pytest.fixture(autouse=True)
def _shared_tiny_models_unchanged():
    """No test may change a shared tiny model's files: another test would see it."""
    yield
    for models in _TINY_MODELS:
        changed = models.changed()
        assert not changed, f"this test changed the shared tiny model(s) {changed}: use hf_dirs.copy()"


@pytest.fixture(scope="session", autouse=True)
def _one_component_scan():
    """Each new AppTest scans every installed package's metadata for Streamlit components (v2
    manifests): ~0.25 s of CPU per AppTest, most of a short test. The packages do not change during
    a session and the app declares no such component, so every AppTest gets the first scan's result
    (a server does this once, at start)."""
    from streamlit.components.v2 import manifest_scanner
    scan, found = manifest_scanner.scan_component_manifests, []

    def scan_once(max_workers=None):
        if not found:
            found.append(scan(max_workers))
        return list(found[0])

    manifest_scanner.scan_component_manifests = scan_once
    yield
    manifest_scanner.scan_component_manifests = scan


# ---- browser tests: one app server and one Chromium for the whole session ----------------------
@pytest.fixture(scope="session")
def screenshots(tmp_path_factory) -> Path:
    """Where browser tests save their screenshots: a temporary folder, so a test run leaves the
    repository as it was; `python -m tests.tour --out docs` points it at the README's pictures."""
    folder = os.environ.get("ATLAS_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        return Path(folder)
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="session")
def app_server(tmp_path_factory):
    """The app as `streamlit run app.py` serves it, one server per worker for every test that needs
    the plain app (browser tests through app_url, the websocket sessions of test_serving)."""
    from serving.servers import AppServer
    with AppServer("app.py", log_dir=tmp_path_factory.mktemp("streamlit")) as server:
        yield server


@pytest.fixture(scope="session")
def app_url(app_server):
    return app_server.url


# V8 without its optimising tiers (Maglev, TurboFan): a test page lives a second or two, too short
# for their compiles to pay off; Chromium then spent ~14% less CPU a link (15 share links opened
# again and again, 2026-11-28: 18.5 s against 21.6 s). JavaScript means the same on every tier.
# The benchmarks keep browser_utils.CHROMIUM_ARGS: they time the page as a visitor's browser runs it.
TEST_CHROMIUM_ARGS = ["--js-flags=--max-opt=1"]


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    from browser_utils import CHROMIUM, CHROMIUM_ARGS
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, *TEST_CHROMIUM_ARGS])
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def pages(browser):
    """Pooled pages, one per window size, for tests that open a link and need no context of their
    own (browser_utils.Pages)."""
    from browser_utils import Pages
    pool = Pages(browser)
    yield pool
    pool.close()
