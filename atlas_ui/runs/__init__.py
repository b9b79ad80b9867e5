"""The runs: models loaded and translations made once per process and shared by every session
(translation.py, warm.py), the plain Result every view draws from (result.py), the what-if, compare,
diagnosis and explanation runs, and the catalogue of models. The part of the app that calls
`transformer`."""
