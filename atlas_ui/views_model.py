"""Kept only for atlas_ui/views_explain.py, which imports `_step_nav` from here; the views now live
in atlas_ui/views/. Goes when views_explain.py moves into views/attribution.py."""
from __future__ import annotations

from .common import step_nav as _step_nav

__all__ = ["_step_nav"]
