"""Statistics over a corpus or a vocabulary: head importance and the pruning order
(head_importance.py, `python -m transformer analyze`), head roles and word alignment (head_roles.py,
aligner.py, alignment.py, corpus_pass.py; `python -m transformer heads`, heads_cli.py), embedding
neighbours of source pieces for source swaps (neighbours.py)."""
