"""The ``mbe`` family: Mini-batch Embedding (Morishita et al. 2021), with its DocRepair baseline's data in
:mod:`ctxmt_cli.data.docrepair`."""
