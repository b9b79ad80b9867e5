"""A colour-mapped matrix as a PNG data URI, in numpy and zlib alone.

Large overviews draw faster as one <image> than as a heatmap that plotly.js paints
cell by cell (benchmarks/bench_overview_browser.py), and the PNG is small.
"""
from __future__ import annotations

import base64
import struct
import zlib

import numpy as np
import plotly.colors as pc

from ._figure import colorscale_value


def _rgb(colour: str) -> tuple[float, float, float]:
    colour = colour.strip()
    if colour.startswith("#"):
        return tuple(float(v) for v in pc.hex_to_rgb(colour))
    return tuple(float(v) for v in pc.unlabel_rgb(colour)[:3])


def colorize(z: np.ndarray, colorscale, zmin: float, zmax: float) -> np.ndarray:
    """(R, C) values → (R, C, 4) uint8 RGBA by linear interpolation of the colour scale;
    NaN cells are transparent (they are the gaps between tiles)."""
    scale = colorscale_value(colorscale)
    stops = np.array([float(position) for position, _ in scale])
    colours = np.array([_rgb(colour) for _, colour in scale])                  # (n, 3)
    span = zmax - zmin if zmax > zmin else 1.0
    t = np.clip((np.nan_to_num(z, nan=zmin) - zmin) / span, 0.0, 1.0)
    rgba = np.empty(z.shape + (4,), dtype=np.uint8)
    for channel in range(3):
        rgba[..., channel] = np.rint(np.interp(t, stops, colours[:, channel]))
    rgba[..., 3] = np.where(np.isnan(z), 0, 255)
    return rgba


def png_bytes(rgba: np.ndarray, level: int = 6) -> bytes:
    """An 8-bit RGBA PNG of an (R, C, 4) uint8 array (filter 0 on every row)."""
    if rgba.ndim != 3 or rgba.shape[2] != 4 or rgba.dtype != np.uint8:
        raise ValueError(f"need an (R, C, 4) uint8 array, got {rgba.shape} {rgba.dtype}")
    height, width = rgba.shape[:2]
    raw = np.zeros((height, 1 + 4 * width), dtype=np.uint8)                    # filter byte 0
    raw[:, 1:] = rgba.reshape(height, -1)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + chunk(b"IDAT", zlib.compress(raw.tobytes(), level)) + chunk(b"IEND", b""))


def png_data_uri(z: np.ndarray, colorscale, zmin: float, zmax: float) -> str:
    return "data:image/png;base64," + base64.b64encode(png_bytes(colorize(z, colorscale, zmin, zmax))).decode()
