"""benchmarks/bench_tiled_hover.py rebuilds the hover as it was (a string per cell) from the figure the
app draws: the comparison is fair only if that string names the same cell as the labels do."""
from __future__ import annotations

import numpy as np

from benchmarks.bench_tiled_hover import built, per_cell_text


def test_the_per_cell_hover_names_what_the_labels_name():
    for kind in ("overview", "grid"):
        ours = built(kind, 6)
        before = per_cell_text(ours)
        heat, old = ours["data"][0], before["data"][0]
        assert "xaxis2" in ours["layout"] and "xaxis2" not in before["layout"]
        assert "x" not in old and "xaxis" not in old and "%{text}" in old["hovertemplate"]
        text = np.asarray(old["text"], dtype=object)
        assert text.shape == (len(heat["y"]), len(heat["x"]))
        for r, row in enumerate(heat["y"]):
            for c, col in enumerate(heat["x"]):
                if row.startswith("gap") or col.startswith("gap"):
                    assert text[r, c] == ""
                else:
                    assert text[r, c].endswith(f"{row}<br>{col}")
        if kind == "grid":                   # second tile row, first tile column: head 4
            r, c = heat["y"].index("query 0: ▁Zwei\u200b"), heat["x"].index("key 0: ▁Zwei")
            assert text[r, c].startswith("Layer 1 · head 4<br>")
        assert len(str(before)) > 2 * len(str(ours))       # the labels are what made the spec small
