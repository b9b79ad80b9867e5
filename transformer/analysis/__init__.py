"""Statistics over a corpus or a vocabulary: head importance and the pruning order
(head_importance.py, `python -m transformer analyze`), embedding neighbours of source pieces for
source swaps (neighbours.py)."""
