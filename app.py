"""Attention Atlas: `streamlit run app.py`. The UI lives in atlas_ui/, the figures in viz/."""
import os
import sys

ROOT = os.path.dirname(os.path.abspath(__file__))   # no resolve(): this runs on every script run
if ROOT not in sys.path:           # AppTest and `streamlit run` from another folder
    sys.path.insert(0, ROOT)

from atlas_ui.main import run  # noqa: E402

run()
