"""Attention Atlas figures: pure functions from numpy arrays and pieces to Plotly figures.

numpy, pandas and plotly only; never streamlit, torch or `transformer`, so the
figures can be built and tested anywhere. Rows are queries, columns are keys.
"""
from ._base import DEFAULT_COLORSCALE, DIVERGING_COLORSCALE, HOVER_TEXT_CELLS, MAIN_WIDTH
from ._labels import (SPECIAL_PIECES, display_tokens, escape_html, escape_label,
                      is_special)
from .compare import align_pieces, changed_table, swap_map_figure, swap_pieces_figure
from .encodings import (embedding_figure, position_bias_figure, position_similarity_figure,
                        positional_encoding_figure)
from .explain import contribution_figure, method_comparison_figure, method_table, source_share_figure
from .export import (PLOTLY_CONFIG, TRACE_SCHEMA, figure_html, plotly_config, presenter_figure, svg_config,
                     trace_json,
                     trace_npz, trace_payload)
from ._figure import figure_parts
from .heatmaps import attention_heatmap
from .importance import importance_figure, importance_frame, pruning_curve_figure, top_heads
from .overview import head_grid_figure, overview_figure, overview_selection
from .phone import PHONE_WIDTH, phone_figure
from ._ticks import keep_labels, keep_peak_labels
from .panels import batch_padding_figure, mask_figure, token_probability_html, topk_bar_figure
from .stats import STAT_COLUMNS, average_statistics, head_statistics, rollout, statistic_figure, statistic_maps_figure
from .words import merge_attention, merge_keys, merge_pieces, word_spans

__all__ = [
    "MAIN_WIDTH",
    "align_pieces", "swap_pieces_figure", "swap_map_figure", "changed_table",
    "attention_heatmap", "overview_figure",
    "source_share_figure", "contribution_figure", "method_comparison_figure", "method_table", "overview_selection", "head_grid_figure",
    "importance_figure", "importance_frame", "pruning_curve_figure", "top_heads",
    "mask_figure", "batch_padding_figure",
    "positional_encoding_figure", "position_similarity_figure", "position_bias_figure", "embedding_figure",
    "topk_bar_figure", "token_probability_html",
    "display_tokens", "is_special", "escape_label", "escape_html", "SPECIAL_PIECES",
    "word_spans", "merge_pieces", "merge_attention", "merge_keys",
    "head_statistics", "average_statistics", "statistic_figure", "statistic_maps_figure", "rollout", "STAT_COLUMNS",
    "PLOTLY_CONFIG", "plotly_config", "svg_config", "figure_html",
    "TRACE_SCHEMA", "presenter_figure", "phone_figure", "figure_parts", "PHONE_WIDTH", "keep_labels", "keep_peak_labels", "trace_payload", "trace_json", "trace_npz",
    "DEFAULT_COLORSCALE", "DIVERGING_COLORSCALE", "HOVER_TEXT_CELLS",
]
