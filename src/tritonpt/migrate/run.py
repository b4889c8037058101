"""The migration of a repository: which models move, each one converted, the proof served, the report written.

IN is read, never written. OUT gets one folder per model that moved; a folder already there is not replaced
without ``force``, and that is checked for every model before any work. A model that cannot move (its
conversion refused, its package off the file, its served outputs off the original's) gets no folder and a line
that says why and what to do; the others go on.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf import text_format

from tritonpt import scratch, stopping
from tritonpt.errors import MigrateError, RefusedError, TritonPtError
from tritonpt.migrate.convert import Migrated, migrate_model
from tritonpt.migrate.proof import Proof, prove
from tritonpt.options import Pt2Build
from tritonpt.repository import PLATFORM, PT2_FILE, PT2_PLATFORM, ModelDir, models, platform_of, read_config
from tritonpt.versions import VERSIONS, TritonRelease

Step = Callable[[str], None]

WINDOW_MS, SMOKE_WINDOW_MS = 1000, 150
"""perf_analyzer's measurement window for the speed figures, and with ``smoke`` (short: the measuring is proven, its
figures rough)."""


@dataclass(frozen=True, kw_only=True)
class Refused:
    """A model that did not move: why, and what to do."""

    name: str
    reason: str
    fix: str


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """The whole run, as the report and the exit code tell it."""

    repository: Path
    into: Path
    pt2_build: Pt2Build
    migrated: tuple[Migrated, ...] = ()
    refused: tuple[Refused, ...] = ()
    left: tuple[tuple[str, str], ...] = ()  # models that are not TorchScript: name, what they are
    proofs: tuple[Proof, ...] = field(default=())

    @property
    def exit_code(self) -> int:
        """0 when every TorchScript model moved and its proof held; 1 when any was refused."""
        return 1 if self.refused else 0


def torchscript(model: ModelDir) -> str:
    """ "" for a model the pytorch backend serves as TorchScript, else what it is (the reason it is left alone)."""
    try:
        config = read_config(model.config)
    except (OSError, text_format.ParseError) as exc:
        return f"its config.pbtxt does not parse ({exc})"
    platform = platform_of(config)
    if platform == PLATFORM:
        return ""
    if platform == PT2_PLATFORM:
        return "already torch_aoti"
    return f"platform {platform!r}" if platform else f"backend {config.backend!r}"


def run(
    repository: Path,
    into: Path,
    *,
    name: str | None = None,
    module: Callable[[], object] | None = None,
    samples: Path | None = None,
    force: bool = False,
    pt2_build: Pt2Build = "stock",
    reports: Path,
    speed: bool = True,
    smoke: bool = False,
    ngc: str | None = None,
    step: Step = lambda _: None,
) -> Outcome:
    """Move every TorchScript model of ``repository`` (or ``name`` alone) into ``into`` as torch_aoti, prove each
    served beside its original, and return what happened (see the module docstring). ``ngc``: the release that will
    serve the packages; each model is warned of, before it compiles and after, for what that release's libtorch
    lacks of its calls (tritonpt.doctor.operators)."""
    release = _release(ngc)
    found = _models(repository, into, name=name, module=module, samples=samples)
    wanted = [m for m in found if not torchscript(m)]
    left = tuple((m.name, torchscript(m)) for m in found if torchscript(m))
    taken = [m.name for m in wanted if (into / m.name).exists()]
    if taken and not force:
        msg = (
            f"--into {into} already holds {', '.join(taken)}: migrate does not replace a folder it did not just make. "
            "Hint: pass --force to replace them, or choose another --into; nothing was written."
        )
        raise MigrateError(msg)
    with kept_until_proven(into, taken):
        return _move(
            repository, into, wanted, left, module=module, samples=samples, pt2_build=pt2_build, reports=reports,
            speed=speed, smoke=smoke, release=release, step=step,
        )  # fmt: skip


def _release(ngc: str | None) -> TritonRelease | None:
    if ngc is None:
        return None
    try:
        return VERSIONS.release(ngc)
    except ValueError as exc:
        msg = f"--ngc {ngc}: {exc} Nothing was written."
        raise MigrateError(msg) from exc


@contextlib.contextmanager
def kept_until_proven(into: Path, taken: Sequence[str]) -> Iterator[None]:
    """The folders of ``into`` that --force replaces, set aside while their models move: each comes back where its
    model did not move (refused, not proven, or the run stopped), and goes only where the proven one took its
    place."""
    if not taken:
        yield
        return
    with scratch.folder(f".{into.name}.kept-", inside=into.parent) as aside:
        try:
            with stopping.ctrl_c_held():
                for name in taken:
                    (into / name).replace(aside / name)
            yield
        finally:
            with stopping.ctrl_c_held():
                for name in taken:
                    if (aside / name).exists() and not (into / name).exists():
                        (aside / name).replace(into / name)


def _move(
    repository: Path,
    into: Path,
    wanted: Sequence[ModelDir],
    left: tuple[tuple[str, str], ...],
    *,
    module: Callable[[], object] | None,
    samples: Path | None,
    pt2_build: Pt2Build,
    reports: Path,
    speed: bool,
    smoke: bool,
    release: TritonRelease | None,
    step: Step,
) -> Outcome:
    """Each wanted model converted into ``into``, then proven served beside its original; one that is not proven
    leaves ``into``."""
    moved: list[Migrated] = []
    refused: list[Refused] = []
    for model in wanted:
        per_model = samples / f"{model.name}.npz" if samples is not None and samples.is_dir() else samples
        if per_model is not None and samples is not None and samples.is_dir() and not per_model.is_file():
            step(
                f"[{model.name}] {samples} has no {per_model.name}: its inputs are its samples.npz, else the config's"
            )
            per_model = None
        loaded = model.loaded_versions()
        ahead = _foresee(model.model_file(loaded[-1] if loaded else "1"), release, compiled=False, step=step)
        try:
            one = migrate_model(model, into, module=module, samples=per_model, pt2_build=pt2_build, step=step)
            package = one.target / one.version / PT2_FILE
            seen = _foresee(package, release, compiled=True, step=step)
            moved.append(dataclasses.replace(one, notes=(*one.notes, *ahead, *seen)))
        except RefusedError as exc:
            step(f"[{model.name}] refused: {exc.reason}")
            refused.append(Refused(name=model.name, reason=exc.reason, fix=exc.fix))
        except TritonPtError as exc:  # its samples, its folder: this model's own input is wrong
            step(f"[{model.name}] refused: {exc}")
            refused.append(
                Refused(
                    name=model.name,
                    reason=str(exc),
                    fix=f"fix what it names, then `--name {model.name}` again.",
                )
            )
    window_ms = SMOKE_WINDOW_MS if smoke else WINDOW_MS
    proofs = prove(moved, pt2_build=pt2_build, reports=reports, speed=speed, window_ms=window_ms, step=step)
    for proof in proofs:
        if not proof.ok:  # served, it does not answer as the original does: it does not move
            shutil.rmtree(into / proof.name, ignore_errors=True)
            moved = [m for m in moved if m.name != proof.name]
            refused.append(
                Refused(
                    name=proof.name,
                    reason=f"not proven: {proof.error}"
                    if proof.error
                    else f"served beside its original, it does not answer the same: {_why(proof)}",
                    fix="look at the proof's lines in the report (and the server's log beside it); keep this model "
                    "on pytorch_libtorch meanwhile.",
                )
            )
    return Outcome(
        repository=repository,
        into=into,
        pt2_build=pt2_build,
        migrated=tuple(moved),
        refused=tuple(refused),
        left=left,
        proofs=tuple(proofs),
    )


def _foresee(path: Path, release: TritonRelease | None, *, compiled: bool, step: Step) -> tuple[str, ...]:
    """What ``release`` lacks of ``path``'s calls, said as a warning now and kept for the report."""
    if release is None or not path.is_file():
        return ()
    from tritonpt.operators import predict  # noqa: PLC0415 - reads model files only where --ngc asks

    said = tuple(f"warning: {line}" for line in predict.foresee(path, release, compiled=compiled))
    for line in said:
        step(f"[{path.parent.parent.name}] {line}")
    return said


def _why(proof: Proof) -> str:
    if proof.error:
        return proof.error
    bad = next(a for a in proof.agreements if not a.ok)
    return (
        f"{bad.output} at {bad.case}: migrated vs original {_figure(bad.migrated_vs_original_abs)}, migrated vs "
        f"file {bad.migrated_vs_file_abs:.3g}, original vs file {_figure(bad.original_vs_file_abs)} (atol {bad.atol:g})"
    )


def _figure(value: float | None) -> str:
    return "not served" if value is None else f"{value:.3g}"


def _models(
    repository: Path,
    into: Path,
    *,
    name: str | None,
    module: Callable[[], object] | None,
    samples: Path | None,
) -> list[ModelDir]:
    """The repository's models (``name``'s alone where given), after the checks that need no work."""
    if not repository.is_dir():
        msg = f"--repository {repository}: there is no such folder. Hint: give the TorchScript repository to move."
        raise MigrateError(msg)
    source, target = repository.resolve(), into.resolve()
    if target == source or source in target.parents or target in source.parents:
        msg = (
            f"--into {into} and --repository {repository} overlap: migrate never writes into the repository it "
            "reads. Hint: give --into a folder outside it, e.g. model_repository_pt2."
        )
        raise MigrateError(msg)
    if module is not None and name is None:
        msg = "--model needs --name: the model of the repository to re-export from that module instead of converting."
        raise MigrateError(msg)
    if samples is not None and not samples.exists():
        msg = f"--samples {samples}: there is no such file or folder. Hint: give a .npz (with --name) or a folder of NAME.npz."
        raise MigrateError(msg)
    found = models(repository)
    if name is not None:
        found = [m for m in found if m.name == name]
        if not found:
            msg = f"--name {name}: {repository} has no model folder of that name. Hint: give one of its folders."
            raise MigrateError(msg)
        if torchscript(found[0]):
            msg = f"--name {name}: it is not a TorchScript model ({torchscript(found[0])}). Hint: name a pytorch_libtorch one."
            raise MigrateError(msg)
    elif samples is not None and samples.is_file():
        msg = f"--samples {samples} is one file: give --name with it, or a folder of NAME.npz for several models."
        raise MigrateError(msg)
    if not found:
        msg = f"--repository {repository}: no model folder (a folder with config.pbtxt) in it; nothing to migrate."
        raise MigrateError(msg)
    return found
