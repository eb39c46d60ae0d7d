"""``python -m ctxmt_cli.cli`` (e.g. under ``torchrun -m ctxmt_cli.cli train ...``)."""

import sys

from ctxmt_cli.cli.app import main

sys.exit(main())
