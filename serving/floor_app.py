"""The floor: the least a page with one attention chart can cost in this process.

torch and our model are loaded (cached once per process, like the app), one cached translation is
drawn as one heatmap, nothing else. `bench_serving.py` runs it next to the app with the same server
settings, so the app's per-session cost is read as a ratio to this page's.
`streamlit run serving/floor_app.py` from the repository root.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from viz import attention_heatmap  # noqa: E402

SENTENCE = "A man is riding a bike."


@st.cache_resource
def load(path: str):
    from transformer import Translator
    return Translator.load(path, device="cpu")


@st.cache_data
def cross_attention(path: str, text: str):
    out = load(path).translate(text, capture=True)
    return out.attention.cross[-1].mean(axis=0), out.output_tokens, out.source_tokens


weights, rows, columns = cross_attention(str(ROOT / "pretrained" / "en-de"), SENTENCE)
st.plotly_chart(attention_heatmap(weights, rows, columns, title="Cross-attention, last layer"))
