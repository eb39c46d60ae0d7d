"""ctxmt: context-aware (document-level) neural machine translation."""

__version__ = "0.1.0"
