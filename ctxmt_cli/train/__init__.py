"""Training: ``trainer.train`` (the loop), ``step`` (one update: accumulation, AMP, DDP normalisation),
``validate``, ``checkpoint`` (atomic files, averaging, ``load_model``), ``distributed`` (torchrun/DDP),
``schedule`` (inverse-sqrt), ``losses`` (context-discounted loss), ``progress``/``telemetry`` (logs)."""
