"""Helpers for the Attention Atlas Streamlit app (`app.py`): loading, state and the views."""
