"""``python -m tritonpt.matrix``: :func:`tritonpt.matrix.run.main`."""

from __future__ import annotations

import sys

from tritonpt.matrix.run import main

if __name__ == "__main__":
    sys.exit(main())
