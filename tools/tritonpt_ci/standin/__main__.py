"""``python -m tritonpt_ci.standin``: the command line of :mod:`tritonpt_ci.standin.cli`."""

from __future__ import annotations

import sys

from tritonpt_ci.standin.cli import main

if __name__ == "__main__":
    sys.exit(main())
