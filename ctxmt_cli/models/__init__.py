"""Model families and what every family shares (loading, checkpoints).

A family is a folder, ``models/<family>/``: its recipe schema (``config.py``, no torch), its model (``model.py``)
and what else it alone needs; it joins by one line in the family catalog (:mod:`ctxmt_cli.family_catalog`). This
package imports nothing, so the recipe schema can read a family's ``config.py`` without importing torch.
"""
