"""The benchmarks ``ctxmt benchmark NAME`` runs, shipped with the package so an installed ctxmt runs them too.

Each module is also a script: ``python -m ctxmt_cli.benchmarks.NAME [--quick]``. ``ctxmt benchmark`` loads
them by file (:func:`ctxmt_cli.cli.benchmark._load_benchmark`); they import their siblings (``bench_util``,
``peers``) by bare name, so nothing here is imported by the rest of ctxmt, and nothing of ctxmt imports them.
"""
