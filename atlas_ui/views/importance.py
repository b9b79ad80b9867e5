"""Head importance from the model directory's head_importance.json (`python -m transformer analyze`):
outlines on the Overview, importance maps and the pruning curve in the Head summary."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import pandas as pd
import streamlit as st

from viz import importance_figure, importance_frame, pruning_curve_figure, top_heads

from ..backend_explain import head_importance
from ..common import chart, escape_md, n_heads, n_layers
from ..settings import IMPORTANT_HEADS, KIND_LABELS

NO_FILE = ("This model has no head_importance.json, so no head is marked as important "
           "(`python -m transformer analyze` writes one).")


@dataclass(frozen=True)
class Importance:
    frame: pd.DataFrame | None    # kind, layer, head, loss_change, michel; None without a usable file
    data: dict | None             # the parsed file
    note: str                     # what is (not) shown, one sentence

    def table(self, kind: str, column: str):
        """(layers, heads) values of one kind, as a numpy array."""
        part = self.frame[self.frame["kind"] == kind]
        return part.pivot(index="layer", columns="head", values=column).to_numpy()

    def marked(self, kind: str) -> list:
        """The IMPORTANT_HEADS heads of `kind` whose removal raised the loss most."""
        return [] if self.frame is None else top_heads(self.table(kind, "loss_change"), IMPORTANT_HEADS)


def load_importance(path: str, result) -> Importance:
    """The head importance of the model directory at `path`, checked against this run's shape;
    never raises."""
    data, error = head_importance(path)
    if error:
        return Importance(None, None, "head_importance.json could not be read: " + escape_md(error, 200))
    if data is None:
        return Importance(None, None, NO_FILE)
    layers = {kind: n_layers(result, kind) for kind in result.attention}
    try:
        frame = importance_frame(data.get("heads"), layers, n_heads(result))
    except ValueError as exc:
        return Importance(None, None, "head_importance.json does not match this model: " + escape_md(str(exc), 200))
    split = escape_md(str(data.get("split", "?")), 40)
    return Importance(frame, data, f"Outlined in red: the {IMPORTANT_HEADS} heads of this kind whose removal "
                                   f"raised the {split} loss most (head_importance.json).")


def importance_rows(importance: Importance, table: pd.DataFrame) -> pd.DataFrame:
    """The Head summary table with loss_change and michel columns when the file is there."""
    if importance.frame is None:
        return table
    return table.merge(importance.frame, on=["kind", "layer", "head"], how="left")


def importance_section(importance: Importance, kind: str, on_pick) -> None:
    """Loss change and Michel importance of every head of `kind`, and the pruning curve.
    `on_pick(key, layers, heads)`: the callback that opens a clicked head."""
    st.subheader("Head importance")
    if importance.frame is None:
        st.caption(importance.note)
        return
    data, marked = importance.data, importance.marked(kind)
    sentences = data.get("sentences", "?")
    split = escape_md(str(data.get("split", "?")), 40)
    columns = st.columns(2)
    for column, (name, title, value) in zip(columns, (
            ("loss_change", f"{KIND_LABELS[kind]}: loss change when the head alone is removed", "loss change (nats)"),
            ("michel", f"{KIND_LABELS[kind]}: Michel et al. importance (normalised)", "importance"))):
        values = importance.table(kind, name)
        key = f"importance_{kind}_{name}"
        with column:
            chart(importance_figure(values, title, value_title=value, marked=marked), key,
                  on_select=partial(on_pick, key, values.shape[0], values.shape[1]), selection_mode="points")
    st.caption(f"Measured over {escape_md(str(sentences), 12)} {split} sentences. Loss change: the teacher-forced "
               "loss with that head alone switched off, minus the full model's (higher = the head matters "
               "more). Michel importance: mean |∂loss/∂gate| of the head, each layer's row scaled to unit length. ★ marks the "
               f"{IMPORTANT_HEADS} heads of this kind with the largest loss change (outlined in the Overview).")
    curve = [point for point in data.get("pruning_curve") or [] if isinstance(point, dict)]
    if curve:
        total = int(importance.frame.shape[0])
        chart(pruning_curve_figure([p.get("heads_removed", 0) for p in curve], [p.get("bleu", 0.0) for p in curve],
                                   [p.get("chrf", 0.0) for p in curve] if all("chrf" in p for p in curve) else None,
                                   "Pruning curve: BLEU as heads are removed, least important first",
                                   total_heads=total), "pruning_curve")
        definitions = data.get("definitions") if isinstance(data.get("definitions"), dict) else {}
        st.caption("Heads switched off least important first (normalised Michel importance, all kinds "
                   "together). " + escape_md(str(definitions.get("pruning_curve", "")).split(". ")[0], 300))
