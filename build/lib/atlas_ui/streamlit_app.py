"""The app as a module of the installed package: what `attention-atlas` hands to `streamlit run`
(app.py at the repository root does the same from a checkout)."""
from atlas_ui.main import run

run()
