"""The page: the top level of a script run (main.py), the first screen, the sidebar and input
area, share links and presenter mode, widget state, several sentences, what-if branches, and
the helpers the views share (common.py, figures.py)."""
