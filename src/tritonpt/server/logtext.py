"""Triton's log wording, read: failure hints, the lines worth showing, and what the log says of model loads.

    hint_for(text)         a Hint: sentence, from the first HINTS key found in a log tail or Triton's reasons
    worth_reading(lines)   log lines without Triton's tables and the notices it logs without a GPU
    load_seconds(log)      each model's load time, from its "loading:" line to its "successfully loaded" line
    also                   STARTED_LINES, signalled(log), briefly(said), LOAD_FAILED, RESTRICTED

Every key is text that Triton (or glibc, or the loader) logs: when Triton rewords a message, change it here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "GLIBC_HEAP_CHECKS",
    "HEAP_CORRUPTED",
    "HINTS",
    "LOAD_FAILED",
    "NO_GPU_NOTICES",
    "RESTRICTED",
    "STARTED_LINES",
    "briefly",
    "hint_for",
    "holding_all",
    "load_seconds",
    "signalled",
    "worth_reading",
]


HEAP_CORRUPTED = (
    "glibc found the server's heap corrupted and aborted it (SIGABRT): a memory bug inside the server process "
    "(Triton, a backend or libtorch), which no request or config should be able to cause. NVIDIA's "
    "trackers hold reports of the same message without a cause "
    "(https://github.com/triton-inference-server/server/issues/7517). Run it again; if it comes back with one "
    "model, serve that model alone and report it upstream with this log."
)
GLIBC_HEAP_CHECKS = (
    "malloc_consolidate(): ",
    "malloc(): ",
    "free(): ",
    "double free or corruption",
    "corrupted size vs. prev_size",
    "munmap_chunk(): invalid pointer",
)
"""What glibc prints before it aborts a process whose heap it found corrupted (glibc 2.36's malloc.c)."""

# Heuristics for the Hint: sentence, first match wins; each key is text Triton (or the loader) writes.
HINTS: tuple[tuple[str, str], ...] = (
    *((check, HEAP_CORRUPTED) for check in GLIBC_HEAP_CHECKS),
    *(
        (
            mark,
            "two torch_aoti models were loaded at once, and torch's package loader read one package's JSON while "
            "the other's was being parsed (a race in torch, docs/upstream/torch-aoti-load-race.md; "
            "pytorch_backend guards against it after r26.05). Load the model again; where several torch_aoti "
            "models load together, --model-load-thread-count=1 loads them one at a time.",
        )
        for mark in ("No device information found.", "type must be string, but is null")
    ),
    (
        "Signal (15) received",
        "something sent the server SIGTERM (`kill`, `docker stop`, a Docker engine that is stopping: it stops its "
        "containers first, a supervisor, a CI runner cancelling the job); Triton then unloads its models and exits "
        "with code 0.",
    ),
    (
        "Signal (2) received",
        "the server got SIGINT (Ctrl-C in the terminal that started it, or `kill -INT`); Triton then unloads its "
        "models and exits.",
    ),
    (
        "Signal (11) received",
        "the server crashed (SIGSEGV: it read or wrote memory it does not own); the backtrace Triton printed names "
        "the library it happened in. No request or config should be able to cause this; if one does every time, "
        "report it upstream with that backtrace.",
    ),
    (
        "Signal (6) received",
        "the server aborted itself (SIGABRT): an uncaught C++ exception ('terminate called after throwing ...') or "
        "a failed check inside Triton, a backend or libtorch; the lines above it say which.",
    ),
    (
        "failed to stat file",
        "the model repository folder does not exist or cannot be read; check the --model-repository path.",
    ),
    (
        "already in use",
        "one of the server's ports is taken; let LocalServer pick free ports (port 0) or stop the other server.",
    ),
    (
        "GLIBC_",
        "this tritonserver needs a newer glibc than the system has; run it in an image built for it.",
    ),
    (
        "libtorch.so: cannot open shared object file",
        "the pytorch backend cannot find libtorch: a built backend runs the torch of the environment it serves "
        "from (LocalServer puts its torch/lib on LD_LIBRARY_PATH); in an image, torch/lib must be on its library path.",
    ),
    (
        "cannot open shared object file",
        "a shared library is missing; the nvidia-pytriton server needs site-packages/nvidia_pytriton.libs on "
        "LD_LIBRARY_PATH (LocalServer sets it), other builds need their own lib folder or their image.",
    ),
    (
        "unable to find backend library for backend 'pytorch'",
        "the server's backend directory has no pytorch/libtriton_pytorch.so; build it with `invoke build-backend` "
        "(LocalServer then serves with it), or use an image whose /opt/tritonserver/backends/pytorch holds it.",
    ),
    (
        "triton backend API version",
        "the pytorch backend was built for another Triton backend API; build it from the pinned sources "
        "(`invoke build-backend`), whose API (1.19) servers 2.51 to 2.62 accept.",
    ),
    (
        "unsupported datatype",
        "the pytorch backend serves BOOL, UINT8, INT8, INT16, INT32, INT64, FP16, FP32 and FP64 only; cast the "
        "tensor inside the model and change config.pbtxt to match.",
    ),
    (
        "configuration expects",
        "config.pbtxt must list exactly as many inputs as the model's forward() takes (self excluded).",
    ),
    (
        "failed to read text proto",
        "a config.pbtxt does not parse with Triton's model_config.proto; the libprotobuf line names the file, "
        "line and column.",
    ),
    (
        "but no GPUs are available",
        "a model asks for KIND_GPU on a machine without a usable GPU; use KIND_AUTO (it falls back to the CPU) "
        "or run on a GPU host.",
    ),
    (
        "failed to load all models",
        "a model failed to load and --exit-on-error is on; its 'failed to load' line above says why. With "
        "exit_on_error=False the server keeps the other models and wait_models_ready reports each failure.",
    ),
)


def hint_for(text: str) -> str | None:
    """The first hint whose key appears in ``text`` (a log tail or Triton's reasons)."""
    for key, hint in HINTS:
        if key in text:
            return hint
    return None


# What every Triton logs on a machine without a GPU (seen with server 2.51.0 on CPU-only hosts): harmless, and no clue to a failure.
NO_GPU_NOTICES: tuple[str, ...] = (
    "Failed to initialize NVML",
    "CudaDriverHelper has not been initialized",
    "Unable to allocate pinned system memory",
    "CUDA memory pool disabled",
    "DCGM unable to start",
    "Collecting CPU metrics",
)


def worth_reading(lines: Iterable[str]) -> list[str]:
    """Log lines without Triton's tables (``+---+``, ``| ... |`` and their empty headings) or no-GPU notices."""
    kept = []
    for line in lines:
        text = line.strip()
        if not text or text.startswith(("+", "|")) or text.endswith("]"):
            continue
        if any(notice in text for notice in NO_GPU_NOTICES):
            continue
        kept.append(line)
    return kept


_LOG_LINE = re.compile(
    r'^[IWE](\d{4}) (\d\d):(\d\d):(\d\d\.\d+) .*?\] "(loading: (.+):\d+|successfully loaded \'(.+)\')"'
)


def load_seconds(log: str) -> dict[str, float]:
    """Each model's load time in a Triton log: from its ``loading: NAME:V`` line to ``successfully loaded 'NAME'``
    (loads run in parallel, so these overlap). Models without both lines are left out."""
    began: dict[str, float] = {}
    took: dict[str, float] = {}
    for line in log.splitlines():
        match = _LOG_LINE.match(line)
        if match is None:
            continue
        _, hours, minutes, seconds, _, loading, loaded = match.groups()
        at = int(hours) * 3600 + int(minutes) * 60 + float(seconds)
        if loading is not None:
            began.setdefault(loading, at)
        elif loaded in began and loaded not in took:  # the first load (a reload comes later)
            took[loaded] = (at - began[loaded]) % 86400  # a load across midnight
    return took


STARTED_LINES = {
    "grpc": "Started GRPCInferenceService",
    "http": "Started HTTPService",
    "metrics": "Started Metrics Service",
}
"""What Triton logs once an endpoint listens (after the startup model loads); keyed by its --allow-<key> flag."""


def holding_all(lines: Iterable[str]) -> re.Pattern[str]:
    """One regular expression that matches a log holding every one of ``lines``.

    Anchored at the start with one lookahead per line, so the lines may come in any order and one search
    costs one pass over the log.
    """
    lookaheads = "".join(rf"(?=[\s\S]*{re.escape(line)})" for line in lines)
    return re.compile(rf"\A{lookaheads}")


SIGNAL_RECEIVED = "Signal ("
"""How Triton's signal handler begins its line ("Signal (15) received.")."""


def signalled(log: str) -> bool:
    """Whether Triton logged a signal it received: a server on its way down after one (SIGTERM: it closes its
    ports, then unloads its models) does not answer, but it is not hung."""
    return SIGNAL_RECEIVED in log


LOAD_FAILED = "load failed for model"
"""Triton's answer to a load request (the repository API) whose model it could not load: ``load failed for model
'm': version 1 is at UNAVAILABLE state: ...`` (server 2.51.0)."""
RESTRICTED = "This protocol is restricted"
"""How server 2.51.0 refuses a gRPC request of a restricted protocol without its header (status UNAVAILABLE):
``This protocol is restricted, expecting header 'triton-grpc-protocol-admin-key'``."""
TORCH_BACKTRACE = " Exception raised from "
"""Where torch's errors (c10::Error) end their message and begin the C++ frames that follow it."""


def briefly(said: str) -> str:
    """``said`` on one line, without the C++ backtrace torch appends to an error (``Exception raised from ...
    (most recent call first): frame #0: ...``), which says nothing to a person checking a model."""
    flat = " ".join(said.split())
    head, cut, _ = flat.partition(TORCH_BACKTRACE)
    return f"{head} (torch's C++ backtrace left out)" if cut else flat
