"""The proof of a move: the original and the migrated model served side by side on one server, same inputs.

One local server with the r26.05 build (it serves both platforms) holds, for each migrated model, the migrated
folder under its name and the original under ``<name>__torchscript``. Every reference case (batch 1 and the
largest batch) goes to both; each output is compared migrated against original, and both against the TorchScript
file in-process. Then perf_analyzer measures both at batch 1 and under the config's batching (the bench's cases).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tritonpt import backend, bench, client, perf_analyzer, reference, scratch
from tritonpt.errors import TritonPtError, first_line
from tritonpt.migrate.convert import Migrated
from tritonpt.options import Pt2Build
from tritonpt.parity import compare
from tritonpt.repository import CONFIG, ModelDir, read_config, render_config
from tritonpt.server.local import LocalServer, TritonFlags
from tritonpt.versions import VERSIONS

Step = Callable[[str], None]
ORIGINAL = "{name}__torchscript"
"""The original's name on the proof's server (one server cannot hold two models of one name)."""


@dataclass(frozen=True, kw_only=True)
class Agreement:
    """One output at one case: the migrated served against the original served, and each against the file
    (the original's figures None where Triton could not serve it: :attr:`Proof.original_error`)."""

    case: str  # "b1", "b8"
    output: str  # the original name
    migrated_vs_original_abs: float | None
    migrated_vs_original_rel: float | None
    migrated_vs_file_abs: float
    original_vs_file_abs: float | None
    atol: float
    rtol: float
    ok: bool


@dataclass(frozen=True, kw_only=True)
class Speed:
    """perf_analyzer's figures for one case (``b1-c1``, ``b8-c1``, ``b1-c8``), both sides over gRPC."""

    case: str
    original_per_s: float
    migrated_per_s: float
    original_p99_ms: float
    migrated_p99_ms: float

    @property
    def ratio(self) -> float:
        """Migrated over original inferences a second: above 1, the move gains."""
        return self.migrated_per_s / self.original_per_s if self.original_per_s else float("nan")


@dataclass(frozen=True, kw_only=True)
class Proof:
    """What serving both showed for one model; ``error``: what stopped the proof (the server's words)."""

    name: str
    agreements: tuple[Agreement, ...] = ()
    speeds: tuple[Speed, ...] = ()
    error: str = ""
    original_error: str = (
        ""  # the original on pytorch_libtorch, in the server's words (a dict it never served)
    )
    speed_error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error and bool(self.agreements) and all(a.ok for a in self.agreements)


def prove(
    moved: Sequence[Migrated],
    *,
    pt2_build: Pt2Build,
    reports: Path,
    speed: bool = True,
    window_ms: int = 1000,
    step: Step = lambda _: None,
) -> list[Proof]:
    """Serve every moved model beside its original on one server and compare them (see the module docstring). What
    stops the proof (the backend's build, the server's start) is each model's :attr:`Proof.error`, in its words;
    perf_analyzer that cannot be had (an offline host without $TRITONPT_WHEELS) leaves the speed unmeasured."""
    if not moved:
        return []
    try:
        return _serve_both(
            moved, pt2_build=pt2_build, reports=reports, speed=speed, window_ms=window_ms, step=step
        )
    except TritonPtError as exc:
        said = f"the proof could not be served: {first_line(exc)}"
        step(said)
        return [Proof(name=one.name, error=said) for one in moved]


def _serve_both(
    moved: Sequence[Migrated], *, pt2_build: Pt2Build, reports: Path, speed: bool, window_ms: int, step: Step
) -> list[Proof]:
    pins = VERSIONS.pt2.build
    flavor = backend.patched(pins) if pt2_build == "patched" else backend.STOCK
    built = backend.ensure(pins=pins, flavor=flavor, step=step)
    reports.mkdir(parents=True, exist_ok=True)
    with scratch.folder("tritonpt-migrate-proof-") as view:
        for one in moved:
            _link(ModelDir(root=one.target), view / one.name)
            original = view / ORIGINAL.format(name=one.name)
            _link(
                ModelDir(root=one.source),
                original,
                rename=original.name,
                skip=("reference.json", "reference.npz"),
            )
            reference.save(one.original, ModelDir(root=original))  # the shapes perf_analyzer sends
        step(f"serving {len(moved)} migrated model(s) beside their originals ({built.describe()})")
        server = LocalServer(
            TritonFlags(model_repository=view),
            pytorch_backend=built,
            pt2_backend=built,
            pt2_build=pt2_build,
            log_path=reports / "tritonserver.log",
        )
        with server:
            states = {m.name: m for m in server.repository_index()}
            tool, unmeasured = None, ""
            if speed:
                try:
                    tool = perf_analyzer.locate(step)
                except TritonPtError as exc:  # the speed is the report's, not the proof's
                    unmeasured = f"perf_analyzer cannot be had here: {first_line(exc)}"
            found = [_prove_one(server, view, one, states, tool, window_ms, step) for one in moved]
            return [dataclasses.replace(p, speed_error=p.speed_error or unmeasured) for p in found]


def _link(model: ModelDir, into: Path, *, rename: str = "", skip: tuple[str, ...] = ()) -> None:
    """``into`` holding ``model``'s entries as links (nothing copied) but ``skip``, its config written anew under
    ``rename``."""
    into.mkdir()
    for entry in model.root.iterdir():
        if entry.name != CONFIG and entry.name not in skip:
            (into / entry.name).symlink_to(entry.absolute(), target_is_directory=entry.is_dir())
    config = read_config(model.config)
    if rename:
        config.name = rename
    (into / CONFIG).write_text(render_config(config), encoding="utf-8")


def _prove_one(  # noqa: PLR0917 - the server, the model and what measures it
    server: LocalServer,
    view: Path,
    one: Migrated,
    states: dict[str, client.ModelState],
    tool: perf_analyzer.Tool | None,
    window_ms: int,
    step: Step,
) -> Proof:
    original_name = ORIGINAL.format(name=one.name)
    state = states.get(one.name)
    if state is None or state.state != "READY":
        said = " ".join((state.reason if state else "not in the server's index").split())
        return Proof(name=one.name, error=f"the migrated model did not load: {said}")
    before_state = states.get(original_name)
    original_error = (
        ""
        if before_state is not None and before_state.state == "READY"
        else "did not load: "
        + " ".join((before_state.reason if before_state else "not in the index").split())
    )
    endpoints = server.endpoints
    migrated_config = read_config(view / one.name / CONFIG)
    renamed = {(r.kind, r.before): r.after for r in one.renamed}
    ref = one.original
    agreements: list[Agreement] = []
    step(f"[{one.name}] the same {len(ref.cases)} request(s) to both")
    for case in ref.cases:
        inputs = {i.name: a for i, a in zip(ref.inputs, case.inputs, strict=True)}
        names = [o.name for o in ref.outputs]
        original: list[client.Array] = []
        if not original_error:
            try:
                original = client.infer(endpoints, "grpc", original_name, inputs, names)
            except Exception as exc:  # tritonclient's errors carry the server's words
                original_error = f"inference failed: {first_line(exc)}"
        moved_inputs = {renamed.get(("input", n), n): a for n, a in inputs.items()}
        moved_names = [renamed.get(("output", n), n) for n in names]
        try:
            migrated = client.infer(endpoints, "grpc", one.name, moved_inputs, moved_names)
        except Exception as exc:  # tritonclient's errors carry the server's words
            return Proof(
                name=one.name,
                agreements=tuple(agreements),
                error=f"the migrated model's inference failed at {case.id}: {first_line(exc)}",
                original_error=original_error,
            )
        for j, (info, expected, got) in enumerate(zip(ref.outputs, case.outputs, migrated, strict=True)):
            tolerance = info.cpu_tolerance
            to_file = compare(info.name, np.asarray(got), expected, tolerance)
            between = compare(info.name, np.asarray(got), original[j], tolerance) if original else None
            served_before = (
                compare(info.name, np.asarray(original[j]), expected, tolerance) if original else None
            )
            agreements.append(
                Agreement(
                    case=case.id,
                    output=info.name,
                    migrated_vs_original_abs=between.max_abs_error if between else None,
                    migrated_vs_original_rel=between.max_rel_error if between else None,
                    migrated_vs_file_abs=to_file.max_abs_error,
                    original_vs_file_abs=served_before.max_abs_error if served_before else None,
                    atol=tolerance.atol,
                    rtol=tolerance.rtol,
                    ok=to_file.ok
                    and (between is None or between.ok)
                    and (served_before is None or served_before.ok),
                )
            )
    speeds: list[Speed] = []
    speed_error = ""
    if original_error:
        speed_error = "the original is not served, so there is nothing to compare the speed with"
    elif tool is not None:
        original_config = read_config(view / original_name / CONFIG)
        windows = bench.time_windows(window_ms, trials=4)
        try:
            for measured in bench.cases_for(original_config):
                step(f"[{one.name}] perf_analyzer {measured.id}, original then migrated")
                before = bench.served(
                    endpoints, "grpc", ModelDir(root=view / original_name), original_config, measured,
                    windows=windows, tool=tool,
                )  # fmt: skip
                after = bench.served(
                    endpoints, "grpc", ModelDir(root=view / one.name), migrated_config, measured,
                    windows=windows, tool=tool,
                )  # fmt: skip
                speeds.append(
                    Speed(
                        case=measured.id,
                        original_per_s=before.throughput,
                        migrated_per_s=after.throughput,
                        original_p99_ms=before.p99_ms,
                        migrated_p99_ms=after.p99_ms,
                    )
                )
        except TritonPtError as exc:
            speed_error = first_line(exc)
    return Proof(
        name=one.name,
        agreements=tuple(agreements),
        speeds=tuple(speeds),
        original_error=original_error,
        speed_error=speed_error,
    )
