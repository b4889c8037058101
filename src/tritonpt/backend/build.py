"""The build: RapidJSON into a prefix, pytorch_backend configured and compiled, staged and moved into the cache."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

from tritonpt import caches, scratch
from tritonpt.backend.cache import BuiltBackend, build_key
from tritonpt.backend.flavor import STOCK, Flavor, apply, patched
from tritonpt.backend.layout import (
    DEFINITION,
    FETCHED,
    LIBRARY,
    MANIFEST,
    RAPIDJSON_DEFINITION,
    TARGET,
    VARIANT_DEFINITION,
    Step,
    Variant,
    cache_root,
    quiet,
)
from tritonpt.backend.sources import fetch_sources, sources_folder, unpack
from tritonpt.backend.toolchain import Toolchain, Torch, check_cxx, resolve_variant
from tritonpt.errors import BackendError, BuildError
from tritonpt.options import BackendChoice as Choice
from tritonpt.options import Sanitizer
from tritonpt.versions import VERSIONS, Backend

# --- The build ----------------------------------------------------------------------------------------------


def configure_command(
    *,
    source_dirs: Mapping[str, Path],
    build_dir: Path,
    prefix: Path,
    torch: Torch,
    toolchain: Toolchain,
    variant: Variant,
    flavor: Flavor = STOCK,
) -> list[str]:
    """The cmake configure line of pytorch_backend: :data:`DEFINITION` plus the paths of this build, and what
    the flavor adds (a sanitizer's flags)."""
    include, api_include = torch.include_dirs
    definitions = {
        **DEFINITION,
        **VARIANT_DEFINITION[variant],
        **flavor.definition(),
        "CMAKE_C_COMPILER": str(toolchain.cc),
        "CMAKE_CXX_COMPILER": str(toolchain.cxx),
        "Python3_EXECUTABLE": str(toolchain.python),
        # FindPython (CMake 4.1) does not ask a venv's interpreter for its headers; we know where they are.
        "Python3_INCLUDE_DIR": str(toolchain.python_include),
        "TRITON_PYTORCH_INCLUDE_PATHS": f"{include};{api_include}",
        "TRITON_PYTORCH_LIB_PATHS": str(torch.lib_dir),
        "RapidJSON_DIR": str(prefix / "lib" / "cmake" / "RapidJSON"),
        # RapidJSON's CMake config puts no include folder on common's targets (without it triton_json.h fails).
        "CMAKE_CXX_FLAGS": f"-isystem {prefix / 'include'} {flavor.cxx_flags}".strip(),
        **{f"FETCHCONTENT_SOURCE_DIR_{name}": str(source_dirs[source]) for name, source in FETCHED.items()},
    }
    if torch.cxx_standard > 17:  # torch 2.14 on: its headers refuse C++17 (the backend asks for 17 at least)
        definitions["TRITON_MIN_CXX_STANDARD"] = str(torch.cxx_standard)
    if variant == "gpu" and toolchain.nvcc is not None:
        definitions["CUDAToolkit_ROOT"] = str(toolchain.nvcc.parent.parent)
    args = [str(toolchain.cmake), "-S", str(source_dirs["pytorch_backend"]), "-B", str(build_dir)]
    return args + [f"-D{key}={value}" for key, value in definitions.items()]


class _Log:
    """The build's full output in one file; remembers the first error line."""

    ERROR = re.compile(r"(^CMake Error|\berror:|undefined reference|cannot find -l)")

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = path.open("w", encoding="utf-8")
        self.first_error = ""

    def run(self, command: Sequence[str], *, on_line: Step | None = None, cwd: Path | None = None) -> int:
        self.first_error = ""  # of the command that fails, not of an earlier one
        self._handle.write(f"$ {' '.join(command)}\n")
        self._handle.flush()
        with subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace", cwd=cwd
        ) as process:
            assert process.stdout is not None  # noqa: S101 - stdout=PIPE above
            for line in process.stdout:
                self._handle.write(line)
                text = line.rstrip()
                if not self.first_error and self.ERROR.search(text):
                    self.first_error = text.strip()
                if on_line is not None:
                    on_line(text)
            code = process.wait()
        self._handle.flush()
        return code

    def write(self, lines: Sequence[str]) -> None:
        self._handle.writelines(f"{line}\n" for line in lines)
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()


def ensure(
    *,
    sources: Path | str | None = None,
    variant: Choice = "cpu",
    cache: Path | None = None,
    force: bool = False,
    step: Step = quiet,
    jobs: int | None = None,
    pins: Backend = VERSIONS.backend,
    flavor: Flavor = STOCK,
) -> BuiltBackend:
    """The backend for this environment's torch: from the cache when it holds the same inputs, else built.

    ``pins``: which build, the TorchScript one (``VERSIONS.backend``, r25.10) or the PT2 one (``VERSIONS.pt2.build``).
    ``flavor``: stock (the default), or our patches and/or a sanitizer (:mod:`tritonpt.backend.flavor`), built
    under a key and a name of their own.
    """
    torch = Torch.locate()
    chosen = resolve_variant(variant, torch)
    toolchain = Toolchain.find(chosen)
    root = cache or cache_root()
    key = build_key(torch, toolchain, chosen, pins, flavor)
    entry = root / "backends" / key
    what = f"{pins.source('pytorch_backend').ref}{flavor.label} {chosen}"
    if not force and (entry / MANIFEST).is_file():
        with contextlib.suppress(BackendError):
            found = BuiltBackend.read(entry)
            caches.note("backend", what, hit=True, say=step)
            return found
    tarballs = fetch_sources(sources_folder(sources), cache=root, step=step, backend=pins)
    built = _build(
        key,
        entry,
        tarballs,
        torch=torch,
        toolchain=toolchain,
        variant=chosen,
        step=step,
        jobs=jobs,
        pins=pins,
        flavor=flavor,
    )
    caches.note("backend", what, hit=False, seconds=built.seconds, say=step)
    return built


def ensure_serving(
    *,
    pt2: bool,
    pt2_patches: bool = False,
    sanitizer: Sanitizer | None = None,
    sources: Path | str | None = None,
    variant: Choice = "cpu",
    force: bool = False,
    step: Step = quiet,
) -> list[tuple[Backend, BuiltBackend]]:
    """The builds a server needs: the TorchScript one, and with ``pt2`` the PT2 one (our patched build with
    ``pt2_patches``); each instrumented with ``sanitizer`` if one is named. From the cache, else built."""
    stock = STOCK.with_sanitizer(sanitizer)
    wanted = [(VERSIONS.backend, stock)]
    if pt2:
        pins = VERSIONS.pt2.build
        wanted.append((pins, patched(pins, sanitizer=sanitizer) if pt2_patches else stock))
    return [
        (pins, ensure(sources=sources, variant=variant, force=force, step=step, pins=pins, flavor=flavor))
        for pins, flavor in wanted
    ]


def _build(
    key: str,
    entry: Path,
    tarballs: Mapping[str, Path],
    *,
    torch: Torch,
    toolchain: Toolchain,
    variant: Variant,
    step: Step,
    jobs: int | None,
    pins: Backend,
    flavor: Flavor,
) -> BuiltBackend:
    started = time.perf_counter()
    entry.parent.mkdir(parents=True, exist_ok=True)
    check_cxx(
        toolchain.cxx, torch.cxx_standard
    )  # only a build needs it; a cache hit asks the compiler its version alone
    log = _Log(entry.parent.parent / "logs" / f"{key}.log")
    with contextlib.closing(log), _staging(entry.parent, key) as staging:
        source_dirs = unpack(tarballs, staging / "src", step, backend=pins)
        _apply_patches(log, flavor, source_dirs["pytorch_backend"], step)
        prefix, build_dir = staging / "rapidjson", staging / "build"
        step("configuring and installing RapidJSON (headers) into the build folder")
        rapidjson = [
            str(toolchain.cmake),
            "-S",
            str(source_dirs["rapidjson"]),
            "-B",
            str(staging / "rapidjson-build"),
        ]
        rapidjson += [
            f"-D{k}={v}" for k, v in {**RAPIDJSON_DEFINITION, "CMAKE_INSTALL_PREFIX": str(prefix)}.items()
        ]
        _checked(log, rapidjson, "configure RapidJSON")
        _checked(
            log, [str(toolchain.cmake), "--install", str(staging / "rapidjson-build")], "install RapidJSON"
        )
        source = pins.pytorch_backend
        step(
            f"configuring pytorch_backend {source.ref}{flavor.label} ({source.commit[:7]}), {variant} variant, against torch "
            f"{torch.version} in {torch.root}"
        )
        configure = configure_command(
            source_dirs=source_dirs,
            build_dir=build_dir,
            prefix=prefix,
            torch=torch,
            toolchain=toolchain,
            variant=variant,
            flavor=flavor,
        )
        _checked(log, configure, "configure pytorch_backend")
        parallel = str(jobs or os.cpu_count() or 2)
        step(f"compiling {LIBRARY} ({parallel} jobs; full log: {log.path})")
        seen: set[str] = set()

        def progress(line: str) -> None:
            match = re.match(
                r"\[\s*(\d+)%\]\s+(Building|Linking)\s+\S+\s+(?:object|(?:shared|static) (?:library|module))\s+(\S+)",
                line,
            )
            if match and match.group(3) not in seen:
                seen.add(match.group(3))
                step(f"  [{match.group(1):>3}%] {match.group(2).lower()} {Path(match.group(3)).name}")

        build = [str(toolchain.cmake), "--build", str(build_dir), "--target", TARGET, "--parallel", parallel]
        _checked(log, build, f"compile {LIBRARY}", on_line=progress)
        log.close()
        built_library = build_dir / LIBRARY
        if not built_library.is_file():
            msg = f"Cannot find {built_library} after a successful build; the full log is {log.path}."
            raise BackendError(msg)
        result = staging / "entry"
        (result / "pytorch").mkdir(parents=True)
        shutil.copy2(built_library, result / "pytorch" / LIBRARY)
        built = BuiltBackend(
            directory=entry,
            key=key,
            variant=variant,
            ref=source.ref,
            commit=source.commit,
            commits={s.name: s.commit for s in pins.sources},
            torch_version=torch.version,
            torch_git_version=torch.git_version,
            torch_cuda=torch.cuda,
            compiler=toolchain.compiler,
            cmake_version=toolchain.cmake_version,
            cuda_toolkit=toolchain.cuda_version,
            library_dirs=_cuda_library_dirs(toolchain) if variant == "gpu" else (),
            seconds=round(time.perf_counter() - started, 1),
            flavor=flavor.label,
            patches=tuple(f"{p.name} {p.sha256}" for p in flavor.patches),
            sanitizer=flavor.sanitizer,
        )
        (result / MANIFEST).write_text(json.dumps(built.manifest(), indent=2) + "\n", encoding="utf-8")
        if entry.exists():  # --force: the old build makes way in one rename too
            entry.replace(staging / "previous")
        result.replace(entry)
    step(f"built {built.describe()} in {built.seconds:.1f} s: {entry}")
    return built


def _apply_patches(log: _Log, flavor: Flavor, folder: Path, step: Step) -> None:
    """The flavor's patches applied to the unpacked pytorch_backend (:func:`tritonpt.backend.flavor.apply`),
    what ``patch`` said written to the build's log."""
    if not flavor.patches:
        return
    step(f"applying {len(flavor.patches)} patch(es) of {flavor.patch_set} to {folder.name}")
    try:
        for name, lines in apply(flavor, folder):
            log.write(lines)
            step(f"  applied {name}")
    except BackendError as exc:
        log.close()
        msg = f"{exc}\nFull log: {log.path}"
        raise BackendError(msg) from exc


def _cuda_library_dirs(toolchain: Toolchain) -> tuple[str, ...]:
    assert toolchain.nvcc is not None  # noqa: S101 - the GPU variant always has one
    home = toolchain.nvcc.parent.parent
    return tuple(str(p) for p in (home / "lib64", home / "lib") if p.is_dir())


def _checked(log: _Log, command: Sequence[str], what: str, *, on_line: Step | None = None) -> None:
    code = log.run(command, on_line=on_line)
    if code != 0:
        log.close()
        first = log.first_error or "no line says 'error'"
        msg = (
            f"Cannot {what}: `{Path(command[0]).name} {' '.join(command[1:3])} ...` exited with {code}.\n"
            f"First error: {first}\nFull log: {log.path}"
        )
        raise BuildError(msg, first_error=first, log=log.path)


@contextlib.contextmanager
def _staging(folder: Path, key: str) -> Iterator[Path]:
    """A build folder beside the cache entries (same file system, so the result moves in one rename), always removed."""
    with scratch.folder(f".build-{key}-", inside=folder) as staging:
        yield staging
