"""The views, by name, in the order the picker shows them. A view is one module declaring one
`View` (views/base.py) plus one line here; `name` is what share links carry (`view=`)."""
from __future__ import annotations

from . import (ablation, attribution, beam, compare, decoding_steps, head_summary, heatmap, layer_grid, masks,
               overview, positional_encodings, rollout)
from . import diagnosis, head_roles, logit_lens
from .base import View, ViewContext

VIEWS: dict[str, View] = {view.name: view for view in (
    heatmap.VIEW,
    layer_grid.VIEW,
    overview.VIEW,
    decoding_steps.VIEW,
    beam.VIEW,
    head_summary.VIEW,
    rollout.VIEW,
    ablation.VIEW,
    compare.VIEW,
    masks.VIEW,
    positional_encodings.VIEW,
    attribution.VIEW,
    diagnosis.VIEW,
    logit_lens.VIEW,
    head_roles.VIEW,
)}

# every view's own share-link parameters, read once when a session opens (state.boot_from_url)
URL_FIELDS = tuple(field for view in VIEWS.values() for field in view.url_fields)

__all__ = ["URL_FIELDS", "VIEWS", "View", "ViewContext"]
