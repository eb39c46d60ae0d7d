"""The ``caching`` family: a caching multi-encoder with sequence shortening ("Sequence Shortening for
Context-Aware Machine Translation", 2023)."""
