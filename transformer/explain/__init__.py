"""Why the model wrote what it wrote: norm-based attention, ALTI+ and saliency for one run
(explanation.py, alti.py), contrastive saliency (contrastive.py), the faithfulness tests that check
them (faithfulness.py), and the per-layer model view they read (model_view.py)."""
from .explanation import Explanation, explain_run, method_scores

__all__ = ["Explanation", "explain_run", "method_scores"]
