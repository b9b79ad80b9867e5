"""What went wrong in a translation (api.md, "What went wrong: diagnosis"): which output words
the source does not support, which source words the translation leaves out.

- signals.py: the raw signals, from batched teacher-forced passes (transformer/forced.py);
- scores.py: per-word scores, flags and the Diagnosis a translation carries;
- fit.py, protocol.py, word_align.py: how the shipped weights were fitted and judged (dev only);
- default.py: the generic weights for models without their own; cli.py: `python -m transformer diagnose`.
"""
from .scores import Diagnosis, Flag, diagnose, diagnose_items

__all__ = ["Diagnosis", "Flag", "diagnose", "diagnose_items"]
