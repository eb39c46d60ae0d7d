"""Exporting trained models to other inference engines (CTranslate2: :mod:`ctxmt_cli.export.ctranslate2`)."""
