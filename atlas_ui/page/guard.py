"""Every part of the page runs guarded: a failure is a short message, never a traceback."""
from __future__ import annotations

import logging

import streamlit as st

from ..ui.common import escape_md

LOG = logging.getLogger("atlas_ui")


def guarded(render, *args):
    """Run one part of the page; a failure becomes a short message instead of a traceback.

    Returns what `render` returned, or None after a failure."""
    try:
        return render(*args)
    except ValueError as exc:
        st.warning("That did not work: " + escape_md(str(exc), 200))
    except Exception as exc:  # noqa: BLE001 - the page must never show a traceback
        LOG.exception("Attention Atlas: unexpected error")
        st.error(f"Something went wrong ({type(exc).__name__}). Try another sentence or reload the page.")
    return None
