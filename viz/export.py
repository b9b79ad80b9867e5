"""Export settings for the Plotly toolbar, and standalone HTML that works offline.

A figure cannot carry its own toolbar config, so the app passes these dicts to
st.plotly_chart(config=...). The camera button then saves PNG at 2× (or SVG).
"""
from __future__ import annotations

import plotly.graph_objects as go

DEFAULT_FILENAME = "attention-atlas"


def plotly_config(image_format: str = "png", filename: str = DEFAULT_FILENAME,
                  scale: float = 2) -> dict:
    """Toolbar config whose camera button downloads `filename.<image_format>`."""
    if image_format not in ("png", "svg", "jpeg", "webp"):
        raise ValueError(f"unsupported image format {image_format!r}")
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": image_format, "filename": filename,
                                 "scale": scale},
    }


PLOTLY_CONFIG = plotly_config()


def svg_config(filename: str = DEFAULT_FILENAME) -> dict:
    """Same toolbar, but the camera button saves an SVG (vector, for papers)."""
    return plotly_config("svg", filename=filename, scale=1)


def figure_html(fig: go.Figure, *, config: dict | None = None) -> str:
    """A standalone HTML page with plotly.js embedded (a CDN link fails offline)."""
    return fig.to_html(include_plotlyjs=True, full_html=True,
                       config=config if config is not None else PLOTLY_CONFIG)
