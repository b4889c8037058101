"""What the runs write for people and for the next run: the matrix's report, the merge of shards' reports, and the
reliability report's parts. Standard library only (with tritonpt.backend's origin, itself standard library), so
that `nox -s merge-reports` runs before any install.

    report.py        an integration run's report (environment, parity table, timings, a shard's identity):
                     summary.md and summary.json
    merge.py         the shards' reports as one (`tritonpt merge-reports`, ``python -m tritonpt.reporting.merge``)
    reliability.py   the reliability report's parts: one JSON object per tier that judges reliability
"""

from __future__ import annotations

from tritonpt.reporting.reliability import count_tracebacks, folder_in, write_part
from tritonpt.reporting.report import ParityRow, Report, ShardIdentity, ShardState, shard_identity

__all__ = [
    "ParityRow",
    "Report",
    "ShardIdentity",
    "ShardState",
    "count_tracebacks",
    "folder_in",
    "shard_identity",
    "write_part",
]
