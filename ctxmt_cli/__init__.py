"""ctxmt: context-aware (document-level) neural machine translation."""

#: the one version number: pyproject.toml reads it (dynamic version), `ctxmt --version` prints it,
#: checkpoints record it
__version__ = "0.1.0"
