"""The Head summary's statistic maps and table, built once per process for every session showing them."""
from __future__ import annotations

from viz import statistic_figure, statistic_maps_figure

from ..ui.common import shared_figure


def scope_key(ctx, over_examples: bool) -> tuple:
    """What the statistics depend on besides the run: the example sentences and the decoding when
    averaged over the examples, nothing otherwise (part of every shared Head summary key)."""
    return (tuple(ctx.example_texts()), ctx.beam) if over_examples else ()


def statistic_map(ctx, frames: dict, over_examples: bool, kind: str, statistic: str, height: int | None = None):
    """statistic_figure of `frames[kind]` (this run's statistics, or the examples' when
    `over_examples`), shared: an audience on a Head summary link built five maps per session."""
    examples = scope_key(ctx, over_examples)

    def build():
        fig = statistic_figure(frames[kind], statistic)
        return fig if height is None else fig.update_layout(height=height)

    return shared_figure(ctx.result, ("statistic", examples, kind, statistic, height), build)


def statistic_maps(ctx, frames: dict, over_examples: bool, kind: str, statistics: tuple):
    """statistic_maps_figure of `frames[kind]` (the small multiples under the large map), shared."""
    return shared_figure(ctx.result, ("statistic_maps", scope_key(ctx, over_examples), kind, tuple(statistics)),
                         lambda: statistic_maps_figure(frames[kind], statistics))


def shared_table(ctx, over_examples: bool, importance_stamp, build):
    """The Head summary's table of every head (`build()`: a DataFrame, read only), made once per
    process for the run, the scope and the model's head_importance.json."""
    return shared_figure(ctx.result, ("statistics_table", scope_key(ctx, over_examples), importance_stamp), build)
