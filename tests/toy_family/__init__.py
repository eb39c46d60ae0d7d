"""A toy family kept outside the package, as a plugin would be: ``prevsrc``, the worked example of
docs/architecture.md (previous source sentences as context, an sNto1 window, and a logged statistic). Its
folder is all of it; ``ctxmt_cli.models.families.add_family`` joins it at run time."""
