"""LM mode: the shared Transformer core trained on EECS498 A5's signed two-digit arithmetic.

tokenizer (A5's vocabulary plus role and padding tokens), data (generation and
the A5 JSON format), models (decoder-only and encoder-decoder on
:class:`nnqs.nn.TransformerCore`), train (the shared loop skeleton), evaluate,
generate (KV-cached), checkpoint (save, resume, load a model), plots (the curve)
and run (one training run in its run folder). The wavefunction side never imports it.
"""
