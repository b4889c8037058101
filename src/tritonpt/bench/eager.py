"""The bench's eager side in a process of its own, for :func:`tritonpt.bench.eager` on pinned cores.

    python -m tritonpt.bench.eager MODEL_DIR CASE_JSON SECONDS THREADS   -> one line of JSON: the Measurement

Started under ``taskset`` on the server's cores, so torch and OpenMP see only those cores
from the start, as a server started under ``taskset`` does.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path

from tritonpt import repository
from tritonpt.bench.measure import Case, measure_eager
from tritonpt.repository import ModelDir


def main(argv: list[str] | None = None) -> int:
    root, case, seconds, threads = argv if argv is not None else sys.argv[1:]
    model = ModelDir(root=Path(root))
    try:
        config = repository.read_config(model.config)
        measured = measure_eager(
            model, Case(**json.loads(case)), seconds=float(seconds), config=config, threads=int(threads)
        )
    except Exception as exc:  # one line for the parent's error, whatever the model raised
        print(f"{type(exc).__name__}: {exc}".splitlines()[0], file=sys.stderr)
        return 1
    print(json.dumps(asdict(measured)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
