"""Training our models on Multi30k: the data (data.py), the loop (train.py, `python -m transformer
train`) and BLEU (evaluate.py, `python -m transformer evaluate`)."""
