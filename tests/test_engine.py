"""One Translator over an engine interface (issue 32, item 1): every family loads as the same class,
the engines are chosen without an import circle, and no caller tells them apart by sniffing."""
import ast
import re
import subprocess
import sys

from conftest import REPO
from transformer import Translator, Translation
from transformer.engine import Engine

SNIFF = re.compile(r"\b(?:has|get)" + r"attr\([^)\n]*['\"]family['\"]")
OWNERS = {"transformer/capture.py", "transformer/hf/hooks.py", "transformer/explain/faithfulness.py"}   # define them
PRIVATE = re.compile(r"\.(?:_gates|_target_ids|_plan|_encode|_trace)\(|\b(?:_capture_cm|_diagnosed|_special_ids|"
                     r"_hf_gating|_current_recorder|_current_gates)\b|tokenizer\._source\b")


def _python_files():
    for path in sorted(REPO.rglob("*.py")):
        relative = path.relative_to(REPO)
        # runs/ at the top is git-ignored scratch; atlas_ui/runs/ is the app's and is checked
        if relative.parts[0] == "runs" or any(part.startswith(".") or part == "__pycache__" for part in relative.parts):
            continue
        yield relative.as_posix(), path.read_text(encoding="utf-8")


def test_every_family_loads_as_the_one_translator(tiny_dir, hf_dirs):
    ours, marian = Translator.load(tiny_dir, device="cpu"), hf_dirs.load("marian")
    assert type(ours) is Translator and type(marian) is Translator and not Translator.__subclasses__()
    assert isinstance(ours.engine, Engine) and isinstance(marian.engine, Engine)
    assert (ours.engine.family, marian.engine.family) == ("ours", "marian")
    for gone in ("is_hf", "family", "model", "tokenizer"):        # asked of the engine, never passed through
        assert not hasattr(ours, gone) and not hasattr(marian, gone), gone
    for tr in (ours, marian):
        out = tr.translate("red dog", max_len=4)
        assert type(out) is Translation and out.decoder_positional_encoding.shape[0] == len(out.output_ids)
        assert tr.engine.tokenizer.pieces([tr.engine.start_id]) == out.target_tokens[:1]
    assert ours.translate("red dog", max_len=4).positional_kind == "sinusoidal"


def test_importing_the_translator_imports_no_hugging_face_code():
    code = ("import sys\nimport transformer.translator\n"
            "print(sorted(m for m in sys.modules if m.startswith(('transformers', 'transformer.hf.'))))")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stdout + result.stderr


def test_no_import_circle_between_translator_engines_and_sources():
    """Every import counted, those inside functions too: translator.py chooses the engine
    (open_engine) and is imported by no engine; engine.py (the interface) imports no engine; sources.py
    (what a model source is) imports neither engine nor translator."""
    def imports(path):
        """Each `from X import ...` as X, and `from .. import name` as name."""
        tree = ast.parse(path.read_text(encoding="utf-8"))
        return {node.module or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names}

    package = REPO / "transformer"
    for path in [package / "engine.py", package / "engine_ours.py", package / "sources.py",
                 *sorted((package / "hf").glob("*.py"))]:
        assert not imports(path) & {"translator", "transformer.translator"}, path
    assert not imports(package / "engine.py") & {"hf", "hf.engine", "hf.runtime", "engine_ours", "translator"}
    assert not imports(package / "sources.py") & {"engine", "engine_ours", "hf", "hf.engine", "translator"}
    assert {"engine_ours", "hf.engine"} <= imports(package / "translator.py")
    assert not (package / "hf" / "adapter.py").exists()


def test_nothing_sniffs_the_family_or_reads_another_modules_private_names():
    sniffing, private = [], []
    for name, text in _python_files():
        if name == "tests/test_engine.py":
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if SNIFF.search(line):
                sniffing.append(f"{name}:{number}: {line.strip()}")
            if name not in OWNERS and PRIVATE.search(line):
                private.append(f"{name}:{number}: {line.strip()}")
    assert not sniffing, "ask the engine (engine.py's questions) instead:\n" + "\n".join(sniffing)
    assert not private, "use the public names (tr.gates, tr.target_ids, tr.engine...):\n" + "\n".join(private)
