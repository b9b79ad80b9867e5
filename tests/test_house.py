"""Issue 53's "Done when" lines, checked on the source: translator.py imports nothing of explain/,
analysis/ or diagnosis/ (not even inside a function); outside the engines nothing asks `is_hf` or
compares a family name; an analysis is one registry line; head_mask is the hooks' channel."""
from __future__ import annotations

import ast

import pytest
import torch

from conftest import REPO
from transformer import analyses
from transformer.hf.families import FAMILIES
from transformer.interventions import Interventions, gate_hooks, intervening, rows_apart, z_name

ANALYSIS_PACKAGES = ("explain", "analysis", "diagnosis")
ENGINES = ("transformer/engine.py", "transformer/engine_ours.py", "transformer/hf/")
CHECKED = ("transformer", "atlas_ui", "serving", "viz")
FAMILY_NAMES = set(FAMILIES) | {"ours", "nllb", "mbart50", "m2m100"}


def imported_modules(path) -> set[str]:
    """Every module an import in `path` names, relative ones resolved inside transformer/."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = ("transformer." if node.level else "") + (node.module or "")
            found |= {base} | {f"{base}.{alias.name}".replace("..", ".") for alias in node.names}
    return found


def family_questions(path) -> list[str]:
    """`x.is_hf`, and comparisons (==, !=, in) of anything with a family name, in one file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Attribute) and node.attr == "is_hf":
            found.append(f"{node.lineno}: is_hf")
        if isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            names = [c.value for o in operands for c in ast.walk(o)
                     if isinstance(c, ast.Constant) and isinstance(c.value, str)]
            if FAMILY_NAMES & set(names):
                found.append(f"{node.lineno}: compares with {sorted(FAMILY_NAMES & set(names))}")
    return found


def test_the_checks_see_what_they_look_for(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("from .diagnosis import diagnose\ndef f(tr):\n    from .explain import explain_run\n"
                      "    return tr.is_hf or tr.engine.family in ('t5', 'bart') or kind == 'marian'\n")
    assert {"transformer.diagnosis", "transformer.explain"} <= imported_modules(sample)
    assert len(family_questions(sample)) == 3


def test_the_translator_imports_no_analysis_package():
    imports = imported_modules(REPO / "transformer" / "translator.py")
    assert "transformer.analyses" in imports
    leaks = {m for m in imports for package in ANALYSIS_PACKAGES if m.startswith(f"transformer.{package}")}
    assert not leaks, leaks


def test_nothing_outside_the_engines_asks_the_family():
    found = []
    for package in CHECKED:
        for path in sorted((REPO / package).rglob("*.py")):
            relative = path.relative_to(REPO).as_posix()
            if not relative.startswith(ENGINES):
                found += [f"{relative}:{q}" for q in family_questions(path)]
    for path in (REPO / "app.py",):
        found += [f"app.py:{q}" for q in family_questions(path)]
    assert not found, "ask the engine (engine.py's questions) instead:\n" + "\n".join(found)


def test_every_analysis_is_one_registry_line_with_a_function_over_a_translation():
    assert list(analyses.REGISTRY) == ["lens", "explain", "align", "diagnose"]
    for name, analysis in analyses.REGISTRY.items():
        assert callable(analysis.load()), name
    assert analyses.asked(["diagnose", "lens"]) == ["lens", "diagnose"]          # registry order
    with pytest.raises(ValueError, match="unknown analysis 'nope'; known: lens, explain"):
        analyses.asked(["nope"])


SEEN: list = []


def _length(tr, out, call):
    """A new analysis, as small as one gets: how many pieces the translation has."""
    SEEN.append(call)
    return len(out.output_ids)


def test_a_new_analysis_runs_through_translate_by_its_registry_line(tiny, monkeypatch):
    """What adding one takes: a function over (tr, out, call) and a line; translate runs it by name."""
    seen = SEEN
    seen.clear()
    monkeypatch.setitem(analyses.REGISTRY, "length", analyses.Analysis("length", f"{__name__}:_length"))
    out = tiny.translate("red dog runs", analyses=("length",))
    assert out.analyses["length"] == len(out.output_ids) and seen[0].logits.shape[0] == len(out.output_ids)
    assert analyses.run("length", tiny, out) == len(out.output_ids) and seen[1].logits is None


def test_head_gates_are_hooks_on_z_and_rows_stay_shareable():
    gates = {"encoder_self": torch.ones(2, 4), "decoder_self": torch.ones(2, 4), "cross": torch.ones(2, 4)}
    gates["cross"][1, 2] = 0.0
    hooks = gate_hooks(gates)
    assert list(hooks) == [z_name("cross", 1)]                                    # modules with a head off
    z = torch.ones(3, 5, 4, 2)                                                    # (B, t, H, dh)
    assert hooks[z_name("cross", 1)]("decoder.1.cross.z", z)[:, :, 2].abs().sum() == 0
    assert len(gate_hooks(gates, every_module=True)) == 6
    with intervening(None, gates):
        assert not rows_apart()                       # gates treat every row alike: sources may be shared
    with intervening({"decoder.0.self.z": lambda name, x: None}, gates):
        assert rows_apart()
    both = Interventions({z_name("cross", 1): lambda name, x: x + 1}, gates)
    out = both.apply(z_name("cross", 1), z)           # gate first, then the caller's hook
    assert torch.equal(out[:, :, 2], torch.ones(3, 5, 2)) and torch.equal(out[:, :, 0], 2 * torch.ones(3, 5, 2))
