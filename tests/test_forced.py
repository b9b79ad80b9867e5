"""The one batched teacher-forced pass (transformer/forced.py): batching, padding and the order of
results change nothing, for ours and a Hugging Face model; chunks respect the budget."""
import numpy as np
import pytest

from transformer.forced import Row, chosen_log_probs, forced_pass, plan_chunks

SENTENCES = ["A man is riding a bike.", "Two dogs play in the snow near a very old red house.", "Hello."]


def _rows(tr):
    rows = []
    for text in SENTENCES:
        out = tr.translate(text, capture=False)
        rows.append(Row(out.source_ids, [tr.engine.start_id] + out.output_ids[:-1], out.output_ids))
    # the same outputs forced on other sources too: rows of different lengths in one batch
    rows += [Row(rows[(i + 1) % len(rows)].source_ids, r.fed_ids, r.output_ids) for i, r in enumerate(rows[:3])]
    return rows


def _one_at_a_time(tr, rows):
    import torch
    out = []
    with torch.inference_mode():
        for r in rows:
            src = torch.tensor([r.source_ids], device=tr.device)
            fed = torch.tensor([r.fed_ids], device=tr.device)
            logits = tr.engine.teacher_forced(src, None, fed)[0].float()        # (T, V)
            lp = torch.log_softmax(logits, -1)[torch.arange(len(r.output_ids)), torch.tensor(r.output_ids)]
            out.append(lp.cpu().numpy().astype(np.float64))
    return out


@pytest.mark.parametrize("family", ["ours", "marian"])
def test_batched_equals_one_at_a_time_in_the_rows_order(family, translator, hf_dirs):
    tr = translator if family == "ours" else hf_dirs.load("marian")
    rows = _rows(tr)
    alone = _one_at_a_time(tr, rows)
    for budget in (10, 200, 10000):           # one row per pass, a few, all in one
        batched = forced_pass(tr, rows, chosen_log_probs, budget=budget)
        assert [len(b) for b in batched] == [len(r.output_ids) for r in rows]
        for b, a in zip(batched, alone):
            np.testing.assert_allclose(b, a, atol=2e-5)
    # the rows' order matters: results follow it, never the batches' sorted order
    swapped = forced_pass(tr, rows[::-1], chosen_log_probs)
    np.testing.assert_allclose(swapped[0], alone[-1], atol=2e-5)


def test_chunks_keep_similar_lengths_together_within_the_budget():
    rows = [Row([1] * s, [2] * t, [3] * t) for s, t in [(5, 5), (40, 30), (6, 5), (41, 31), (5, 6)]]
    chunks = plan_chunks(rows, budget=40)
    assert sorted(r for c in chunks for r in c) == list(range(5))
    for chunk in chunks:
        padded = (max(len(rows[r].source_ids) for r in chunk) + max(len(rows[r].fed_ids) for r in chunk)) * len(chunk)
        assert padded <= 40 or len(chunk) == 1
    assert {0, 2, 4} in [set(c) for c in chunks]          # the three short rows share one pass


def test_rows_that_repeat_a_source_encode_it_once_unless_a_capture_records(translator):
    """Diagnosis puts pieces back under the unchanged source: those rows share one encoding, and
    give what encoding each row gives (the test above); a capture keeps one encoder row per row."""
    import torch

    from transformer.capture import capture
    from transformer.engine import shared_sources

    source = torch.tensor([[5, 6, 2], [7, 2, 0], [5, 6, 2], [5, 6, 2]])
    first, inverse = shared_sources(source)
    assert len(first) == 2 and torch.equal(source[first][inverse], source)
    assert shared_sources(source[:2]) is None and shared_sources(source[:1]) is None
    with capture():
        assert shared_sources(source) is None
    tr = translator
    encoded = []
    real = tr.engine.model.encode
    tr.engine.model.encode = lambda src, *a, **k: encoded.append(len(src)) or real(src, *a, **k)
    try:
        out = tr.translate(SENTENCES[0], capture=False)
        rows = [Row(out.source_ids, [tr.engine.start_id] + out.output_ids[:-1], out.output_ids)] * 3
        forced_pass(tr, rows, chosen_log_probs)
        assert encoded[-1] == 1
        src = torch.tensor([out.source_ids] * 3, device=tr.device)
        fed = torch.tensor([rows[0].fed_ids] * 3, device=tr.device)
        with torch.inference_mode(), capture():
            tr.engine.teacher_forced(src, None, fed)
        assert encoded[-1] == 3
    finally:
        del tr.engine.model.encode
