"""Stage "migrate": a TorchScript repository moved to ``torch_aoti`` (PT2), with the proof that nothing changed.

    run(IN, OUT, ...) -> Outcome       each pytorch_libtorch model converted, compiled, held, served beside its
                                       original (tritonpt.migrate.run, .convert, .proof)
    report.write(outcome, folder)      migrate.json and migrate.md

``tritonpt migrate --repository IN --into OUT`` is its door (tritonpt.cli).
"""

from tritonpt.errors import MigrateError, RefusedError
from tritonpt.migrate import report
from tritonpt.migrate.convert import Held, Migrated, Renamed
from tritonpt.migrate.proof import Agreement, Proof, Speed
from tritonpt.migrate.run import Outcome, Refused, run, torchscript

__all__ = [
    "Agreement",
    "Held",
    "MigrateError",
    "Migrated",
    "Outcome",
    "Proof",
    "Refused",
    "RefusedError",
    "Renamed",
    "Speed",
    "report",
    "run",
    "torchscript",
]
