"""A chart's tooltip on a touch screen (issue 52): a tap opens it, the next tap closes it, and it stays
inside the plot, off the axis labels.

plotly.js opens a tooltip on the mouse events a browser makes up after a tap, and closes it when the
mouse leaves the plot, which a finger never does: the tooltip stayed up for good, and plotly.js hung
it beside the point wherever the figure had room, over the tick labels under the bottom row.
"""
from __future__ import annotations

import streamlit as st

# Constants only (no user text). st.html is not in an iframe: the script sees the page's charts.
# plotly.js closes a chart's tooltip on a mouseout from its drag layer (dragbox.js); a tap that starts
# while one is up sends it that first, and the tap goes on: on another cell it opens that one's, on
# the same cell the tooltip it reopens is closed again.
# A tooltip is moved (its group's translate) into the plot area whenever plotly.js draws one.
TAP_TOOLTIPS_JS = """<script>(() => {
  if (window.__atlasTapTooltips) return;
  window.__atlasTapTooltips = true;
  const pointsOf = (gd) => (gd._hoverdata || []).map((p) => `${p.curveNumber}:${p.pointNumber}`).join('|');
  const close = (gd) => {
    for (const drag of gd.querySelectorAll('.nsewdrag')) {
      drag.dispatchEvent(new MouseEvent('mouseout', {bubbles: true}));
    }
  };
  let closed = null;            // the tooltip a tap just closed: the same tap on its cell does not reopen it
  document.addEventListener('touchstart', () => {
    closed = null;
    for (const gd of document.querySelectorAll('.js-plotly-plot')) {
      if (!gd.querySelector('.hoverlayer .hovertext')) continue;
      closed = {gd, points: pointsOf(gd), at: performance.now()};
      close(gd);
    }
  }, {capture: true, passive: true});
  const keepInside = (gd) => {
    const size = gd._fullLayout && gd._fullLayout._size;
    if (!size) return;
    const frame = gd.getBoundingClientRect();
    const left = frame.left + size.l, top = frame.top + size.t, right = left + size.w, bottom = top + size.h;
    for (const box of gd.querySelectorAll('.hoverlayer .hovertext')) {
      const at = /translate\\(\\s*([-\\d.e]+)[ ,]+([-\\d.e]+)\\s*\\)/.exec(box.getAttribute('transform') || '');
      if (!at) continue;
      const b = box.getBoundingClientRect();
      let dx = 0, dy = 0;
      if (b.right > right) dx = right - b.right;
      if (b.left + dx < left) dx = left - b.left;
      if (b.bottom > bottom) dy = bottom - b.bottom;
      if (b.top + dy < top) dy = top - b.top;
      if (dx || dy) box.setAttribute('transform', `translate(${+at[1] + dx},${+at[2] + dy})`);
    }
  };
  new MutationObserver((records) => {
    const drawn = new Set();
    for (const record of records) {
      const layer = record.target.closest && record.target.closest('.hoverlayer');
      const gd = layer && layer.closest('.js-plotly-plot');
      if (!gd || drawn.has(gd) || !gd.querySelector('.hoverlayer .hovertext')) continue;
      drawn.add(gd);
      if (closed && closed.gd === gd && closed.points === pointsOf(gd) && performance.now() - closed.at < 1000) {
        closed = null;
        close(gd);
      } else {
        keepInside(gd);
      }
    }
  }).observe(document.body, {childList: true, subtree: true});
})();</script>"""


def tap_tooltips() -> None:
    """On a phone's page: one script for every chart (a page load runs it once)."""
    st.html(TAP_TOOLTIPS_JS, unsafe_allow_javascript=True)
