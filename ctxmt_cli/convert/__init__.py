"""Models of other toolkits as ctxmt checkpoints (``ctxmt import``): Marian / OPUS-MT in Hugging Face's format."""
