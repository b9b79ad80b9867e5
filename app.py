"""Attention Atlas: `streamlit run app.py`. The UI lives in atlas_ui/, the figures in viz/."""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
if str(ROOT) not in sys.path:      # AppTest and `streamlit run` from another folder
    sys.path.insert(0, str(ROOT))

from atlas_ui.main import run  # noqa: E402

run()
