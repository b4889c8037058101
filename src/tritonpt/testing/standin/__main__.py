"""``python -m tritonpt.testing.standin``: the command line of :mod:`tritonpt.testing.standin.cli`."""

from __future__ import annotations

import sys

from tritonpt.testing.standin.cli import main

if __name__ == "__main__":
    sys.exit(main())
