"""Stage "bench": what serving costs against eager PyTorch, measured side by side with NVIDIA's perf_analyzer.

Three cases (b1-c1, bN-c1, b1-cN) per model on each side: eager (the model file in a process of its own) and http
and grpc (one tritonserver, loaded by :mod:`tritonpt.perf_analyzer`); inferences/s, latency percentiles, the
server's time split, the batches formed, the first request after a load, in reports/bench/. The stage's face: the
measuring is ``measure``, the eager side's process ``eager``, the reports ``report``; ``python -m tritonpt.bench``.
"""

from __future__ import annotations

from tritonpt.bench.measure import (
    COUNTED_UP_TO,
    FEWEST_REQUESTS,
    LONGEST_COUNT_S,
    SHORTEST_WINDOW_MS,
    SIDES,
    UNSTABLE,
    WARM_REQUESTS,
    BenchError,
    Case,
    FirstRequest,
    Measurement,
    Pinning,
    batches_formed,
    cases_for,
    count_windows,
    eager,
    first_requests,
    measure_eager,
    pace,
    served,
    time_windows,
    windows_for,
    write_reports,
)

__all__ = [
    "COUNTED_UP_TO",
    "FEWEST_REQUESTS",
    "LONGEST_COUNT_S",
    "SHORTEST_WINDOW_MS",
    "SIDES",
    "UNSTABLE",
    "WARM_REQUESTS",
    "BenchError",
    "Case",
    "FirstRequest",
    "Measurement",
    "Pinning",
    "batches_formed",
    "cases_for",
    "count_windows",
    "eager",
    "first_requests",
    "measure_eager",
    "pace",
    "served",
    "time_windows",
    "windows_for",
    "write_reports",
]
