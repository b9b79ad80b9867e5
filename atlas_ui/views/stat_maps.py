"""The Head summary's statistic maps and table, built once per process for every session showing them."""
from __future__ import annotations

from viz import statistic_figure, statistic_maps_figure

from ..common import shared_figure


def statistic_map(ctx, frames: dict, over_examples: bool, kind: str, statistic: str, height: int | None = None):
    """statistic_figure of `frames[kind]` (this run's statistics, or the examples' when
    `over_examples`), shared: an audience on a Head summary link built five maps per session."""
    examples = (tuple(ctx.example_texts()), ctx.beam) if over_examples else ()

    def build():
        fig = statistic_figure(frames[kind], statistic)
        return fig if height is None else fig.update_layout(height=height)

    return shared_figure(ctx.result, ("statistic", examples, kind, statistic, height), build)


def statistic_maps(ctx, frames: dict, over_examples: bool, kind: str, statistics: tuple):
    """statistic_maps_figure of `frames[kind]` (the small multiples under the large map), shared."""
    examples = (tuple(ctx.example_texts()), ctx.beam) if over_examples else ()
    return shared_figure(ctx.result, ("statistic_maps", examples, kind, tuple(statistics)),
                         lambda: statistic_maps_figure(frames[kind], statistics))


def shared_table(ctx, over_examples: bool, importance_stamp, build):
    """The Head summary's table of every head (`build()`: a DataFrame, read only), made once per
    process for the run, the scope and the model's head_importance.json."""
    examples = (tuple(ctx.example_texts()), ctx.beam) if over_examples else ()
    return shared_figure(ctx.result, ("statistics_table", examples, importance_stamp), build)
