"""Hello world with one chart: the least any Streamlit page with a plotly chart costs to paint.

A title and one small plotly heatmap, nothing else: no torch, no model, no caches. It is the
baseline of benchmarks/bench_first_paint.py (the app's first paint is read as a ratio to this
page's). `streamlit run serving/hello_app.py` from the repository root.
"""
import plotly.graph_objects as go
import streamlit as st

SIZE = 8
weights = [[1.0 / (1 + abs(row - column)) for column in range(SIZE)] for row in range(SIZE)]
labels = [f"t{i}" for i in range(SIZE)]

st.title("Hello")
st.plotly_chart(go.Figure(go.Heatmap(z=weights, x=labels, y=labels, colorscale="Blues"),
                          layout=dict(height=320, margin=dict(l=40, r=10, t=10, b=40))))
