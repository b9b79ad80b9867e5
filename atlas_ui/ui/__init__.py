"""What the page (page/) and the views (views/) both use, below both of them and below the runs:
widget state and the link's fields (state.py), safe text, charts, pickers and the step navigator
(common.py), the figures every session shares (figures.py; runs/result.py keeps head statistics
there too), and the what-if branch a session is on, with its panel (branch.py). It imports nothing
of page/, views/ or runs/ (tests/test_import_graph.py)."""
