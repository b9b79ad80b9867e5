"""What a view is (View) and everything one view's render gets (ViewContext).

A view is one module with one View; the registry (views/__init__.py) lists them. Views get the
run on screen and ask the context for more (another sentence, an ablated run, the attribution)
instead of each taking its own mix of arguments."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import plotly.graph_objects as go
import streamlit as st

from ..ui import branch
from ..runs.translation import example_statistics, get_translator, translate
from ..runs.branch import branch_key, translate_prefix
from ..runs.explain import attribution, attribution_average, attribution_key
from ..runs.catalogue import ModelRef
from ..ui.common import Display
from ..runs.result import Result
from ..server.settings import MAX_CHARS, max_concurrent
from ..runs.warm import RunKey, held
from .shared import spinner_unless_held


@dataclass(frozen=True)
class ViewContext:
    """The run on screen and how it was made: enough to draw it and to ask for related runs
    (same model, device and decoding). One per page run; views never change it."""
    result: Result
    display: Display
    examples: list                 # example rows (dicts by language code) for this model
    source_key: str                # the examples' column of the model's source language
    text: str                      # the input sentence, cut to MAX_CHARS: run.text
    reference: str                 # the reference translation ("" when none is forced)
    model: ModelRef
    device: str
    beam: int                      # beam size asked for (1: greedy)
    run: RunKey                    # the page's run, named once (related runs: run.but(...))

    @property
    def target(self) -> str | None:
        return self.reference if self.reference.strip() else None

    def example_texts(self) -> tuple:
        """The example sentences in the source language (for the averages over the examples)."""
        return tuple(row[self.source_key] for row in self.examples if row.get(self.source_key))

    def translate_other(self, text: str) -> Result:
        """A second sentence with the same model and decoding, no reference (the Masks view). Cut to
        MAX_CHARS here: it is not the page's text but an example sentence, read from a file."""
        text, explain = text[:MAX_CHARS], bool(self.display.norm)
        # a translation this process holds needs no spinner (a timer thread and a transient element
        # per run of every session; Masks asks twice a run), as attribution() below
        run = self.run.but(text=text, beam_size=self.beam, target=None, explain=explain)
        ready = held().get(run.digest)
        if isinstance(ready, Result):                 # (a failed explain=True is held under the same key)
            return ready
        with st.spinner("Translating the other sentence…"):
            return translate(run, max_concurrent())

    @property
    def branch_prefix(self) -> tuple:
        """The forced pieces of the what-if branch on screen; () when the run on screen is the
        original (atlas_ui/ui/branch.py: the page's Original / Branch switch)."""
        run = branch.current()
        if run is None or not run.on_branch or run.branch is not self.result:
            return ()
        return tuple(run.prefix)

    def variant(self, head_mask: tuple = (), pieces: tuple | None = None) -> Result:
        """This sentence again: with heads switched off, and/or forced through the given pieces.
        On a branch, heads off without pieces decodes the branch again (same forced prefix). The
        text is the page's run's (page/sentences.split_input cut it to MAX_CHARS already)."""
        prefix = self.branch_prefix
        if prefix and pieces is None and head_mask:
            return translate_prefix(branch_key(self.run, prefix).but(beam_size=self.beam, head_mask=tuple(head_mask),
                                                                     explain=False), max_concurrent())
        target = pieces if pieces is not None else self.target
        return translate(self.run.but(beam_size=1 if target else self.beam, target=target, head_mask=tuple(head_mask),
                                      explain=False), max_concurrent())

    def positional_table(self, positions: int):
        """(positions, d_model): what the model's encoder adds at positions 0..positions-1."""
        return get_translator(self.model, self.device).positional_table(positions)

    def examples_run(self) -> RunKey:
        """The decoding the averages over the example sentences use, derived from the page's run: no
        reference, the beam asked for, no heads off, not explained; each example is its
        `but(text=...)`. (No text of its own: one key for every sentence on the page.)"""
        return self.run.but(text="", beam_size=self.beam, target=None, head_mask=(), explain=False)

    def example_stats(self) -> dict:
        """kind -> head statistics averaged over the example sentences."""
        return example_statistics(self.examples_run(), self.example_texts(), max_concurrent())

    def attribution(self) -> dict:
        """The Attribution view's numbers for the run on screen (same decoding and reference), under
        the key derived from the page's run (runs/explain.attribution_key). A branch is forced through
        its own pieces: the same teacher-forced numbers as the branch, cached by those pieces."""
        key = attribution_key(self.run, tuple(self.result.output_tokens) if self.branch_prefix else None)
        # held already (a rerun, a room on one link): no spinner, whose timer thread and transient
        # element every session would pay for, and no hashing of the key
        return spinner_unless_held(key, "Comparing the methods and running the perturbation test…",
                                   lambda: attribution(key, max_concurrent()))

    def attribution_average(self) -> dict:
        """The attribution's perturbation summary and correlations over the example sentences."""
        return attribution_average(self.examples_run(), self.example_texts(), max_concurrent())


@dataclass(frozen=True)
class View:
    """One view of the run. `name` is what the picker shows and share links carry (`view=`), so
    it never changes once released."""
    name: str
    title: str                     # a longer name, saying which part of the model it shows
    explains: str                  # one sentence for a newcomer: what the picture shows
    render: Callable[[ViewContext], go.Figure | None]   # draws the view; its main figure (for export) or None
    norm_switch: bool = False      # has the raw / norm-weighted switch (the run is made with explain=True)
    needs_explain: bool = False    # always needs the explained run (norm, ALTI+, saliency)
    steps: bool = False            # walks the output step by step: the translation strip marks the step
    # the view's own share-link parameters: (URL name, session key, parser), e.g. ("branch", "branch", str);
    # read once per session like state.URL_FIELDS, written while the view is shown
    url_fields: tuple = ()
