"""The page: the top level of a script run (main.py), the first screen, the sidebar and input
area, share links and presenter mode, several sentences, the what-if branch's run, and the model
the page opens. What the views use too lives below both, in atlas_ui/ui/."""
