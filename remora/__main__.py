"""``python -m remora`` runs the ``remora`` command."""

from __future__ import annotations

import sys

from remora.cli import main

if __name__ == "__main__":
    sys.exit(main())
