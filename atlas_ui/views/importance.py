"""Head importance from the model directory's head_importance.json (`python -m transformer analyze`):
outlines on the Overview, importance maps and the pruning curve in the Head summary."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache, partial

import pandas as pd
import streamlit as st

from viz import importance_figure, importance_frame, pruning_curve_figure, top_heads

from ..runs.explain import head_importance, head_importance_stamp
from ..ui.common import chart, escape_md, n_heads, n_layers, shared_figure
from ..server.settings import IMPORTANT_HEADS, KIND_LABELS

NO_FILE = ("This model has no head_importance.json, so no head is marked as important "
           "(`python -m transformer analyze` writes one).")


@dataclass(frozen=True)
class Importance:
    frame: pd.DataFrame | None    # kind, layer, head, loss_change, michel; None without a usable file
    data: dict | None             # the parsed file
    note: str                     # what is (not) shown, one sentence
    marked_heads: dict = field(default_factory=dict)    # kind -> the outlined heads, worked out once
    tables: dict = field(default_factory=dict)          # (kind, column) -> table(kind, column)
    stamp: object = None          # the file's stamp: names its figures in the shared figure cache

    def table(self, kind: str, column: str):
        """(layers, heads) values of one kind, as a numpy array (read only: made once, shared)."""
        if (kind, column) not in self.tables:
            part = self.frame[self.frame["kind"] == kind]
            values = part.pivot(index="layer", columns="head", values=column).to_numpy()
            values.setflags(write=False)
            self.tables[(kind, column)] = values
        return self.tables[(kind, column)]

    def marked(self, kind: str) -> list:
        """The IMPORTANT_HEADS heads of `kind` whose removal raised the loss most."""
        if self.frame is None:
            return []
        if kind not in self.marked_heads:
            self.marked_heads[kind] = top_heads(self.table(kind, "loss_change"), IMPORTANT_HEADS)
        return list(self.marked_heads[kind])


def load_importance(path: str, result) -> Importance:
    """The head importance of the model directory at `path`, checked against this run's shape;
    never raises. Shared by every session of the process (read only): an audience on an Overview
    link parsed and pivoted the same file once per session."""
    layers = tuple((kind, n_layers(result, kind)) for kind in result.attention)
    return _load_importance(str(path), head_importance_stamp(path), layers, n_heads(result))


@lru_cache(maxsize=32)
def _load_importance(path: str, stamp, layers: tuple, heads: int) -> Importance:
    """`stamp` (the file's size and time) makes a rewritten file a new entry."""
    data, error = head_importance(path)
    if error:
        return Importance(None, None, "head_importance.json could not be read: " + escape_md(error, 200))
    if data is None:
        return Importance(None, None, NO_FILE)
    try:
        frame = importance_frame(data.get("heads"), dict(layers), heads)
    except ValueError as exc:
        return Importance(None, None, "head_importance.json does not match this model: " + escape_md(str(exc), 200))
    split = escape_md(str(data.get("split", "?")), 40)
    return Importance(frame, data, f"Outlined in red: the {IMPORTANT_HEADS} heads of this kind whose removal "
                                   f"raised the {split} loss most (head_importance.json).", stamp=stamp)


def importance_rows(importance: Importance, table: pd.DataFrame) -> pd.DataFrame:
    """The Head summary table with loss_change and michel columns when the file is there."""
    if importance.frame is None:
        return table
    return table.merge(importance.frame, on=["kind", "layer", "head"], how="left")


IMPORTANCE_OPEN = "importance_open"    # session key: the Head summary's importance section is open


def importance_section(importance: Importance, kind: str, on_pick, result=None) -> None:
    """Loss change and Michel importance of every head of `kind`, and the pruning curve.
    `on_pick(key, layers, heads)`: the callback that opens a clicked head. With `result` (the run on
    screen), the figures are shared by every session showing it (common.shared_figure)."""
    # drawn only while open (lazy; opening it is one rerun): three charts fewer for every session of a
    # room opening a Head summary link; its label never changes (a stateful expander's identity)
    box = st.expander("Head importance: loss change, Michel importance and the pruning curve", key=IMPORTANCE_OPEN,
                      on_change="rerun")
    if not box.open:
        return
    with box:
        _importance_body(importance, kind, on_pick, result)


def _importance_body(importance: Importance, kind: str, on_pick, result) -> None:
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
        fig = shared_figure(result, ("importance", importance.stamp, kind, name),
                            partial(importance_figure, values, title, value_title=value, marked=marked))
        with column:
            chart(fig, key, on_select=partial(on_pick, key, values.shape[0], values.shape[1]), selection_mode="points")
    st.caption(f"Measured over {escape_md(str(sentences), 12)} {split} sentences. Loss change: the teacher-forced "
               "loss with that head alone switched off, minus the full model's (higher = the head matters "
               "more). Michel importance: mean |∂loss/∂gate| of the head, each layer's row scaled to unit length. ★ marks the "
               f"{IMPORTANT_HEADS} heads of this kind with the largest loss change (outlined in the Overview).")
    curve = [point for point in data.get("pruning_curve") or [] if isinstance(point, dict)]
    if curve:
        total = int(importance.frame.shape[0])
        chart(shared_figure(result, ("pruning_curve", importance.stamp), partial(
            pruning_curve_figure, [p.get("heads_removed", 0) for p in curve], [p.get("bleu", 0.0) for p in curve],
            [p.get("chrf", 0.0) for p in curve] if all("chrf" in p for p in curve) else None,
            "Pruning curve: BLEU as heads are removed, least important first", total_heads=total)), "pruning_curve")
        definitions = data.get("definitions") if isinstance(data.get("definitions"), dict) else {}
        st.caption("Heads switched off least important first (normalised Michel importance, all kinds "
                   "together). " + escape_md(str(definitions.get("pruning_curve", "")).split(". ")[0], 300))
