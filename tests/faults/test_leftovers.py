"""The leftover count itself: one leftover of each kind is planted where a front door writes, and the count must
name it; a clean run counts nothing. Without this, a count that looks in the wrong place reads "0 leftovers"
after every fault."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tritonpt.backend.layout import LIBRARY, MANIFEST
from tritonpt.backend.serving import PT2_LIBRARY, PT2_NAME
from tritonpt.export.stamp import STAMP
from tritonpt.repository import SPLIT_FILE
from tritonpt_ci.qa.generate import RECORD

from .injector import FaultRun, marked_processes

# Where each stage writes in a cache, and what a whole entry holds (its last rename put it there).
WHOLE = {
    "backends/r25.10-abc-torch2.9.1-cpu-0123": (MANIFEST,),
    "qa-models/r25.10-0123456789ab": (RECORD,),
    "tools/perf_analyzer-2.51.0": ("perf_analyzer",),
    "served/a+b": (f"pytorch/{LIBRARY}", f"{PT2_NAME}/{PT2_LIBRARY}"),
    "server-libs/libtritonserver-717102f0": ("libtritonserver.so",),
    "sources": ("pytorch_backend-3281319.tar.gz",),
    "wheels": ("tritonclient-2.51.0-py3-none-manylinux1_x86_64.whl",),
    "logs": ("r25.10-3281319-torch2.9.1-cpu.log",),
}
PARTIAL_FOLDERS = (
    "backends/.build-0123-x1y2",  # a build's staging folder
    "backends/r25.10-def-torch2.9.1-cpu-4567",  # an entry without its manifest
    "served/.a+c-e5f6",  # the pair's staging folder
    "served/a+d",  # a pair without its links
    "tools/.perf_analyzer-2.51.0-g7h8",  # the tool's staging folder
    "qa-models/.r25.10-fedcba987654-i9j0",  # a generation's staging folder
    "qa-models/r25.10-fedcba987654",  # generated models without their record
)
PARTIAL_FILES = (
    "sources/.pytorch_backend-3281319.tar.gz.a1b2",  # a partial download
    "wheels/.tritonclient-2.51.0-py3-none-manylinux1_x86_64.whl.c3d4",
    "server-libs/libtritonserver-717102f0/.libtritonserver.so.4242",  # a staged link
)
PARTIAL = PARTIAL_FOLDERS + PARTIAL_FILES


def _whole_cache(cache: Path) -> None:
    for folder, files in WHOLE.items():
        for name in files:
            path = cache / folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("x", encoding="utf-8")


def _plant(cache: Path) -> None:
    for entry in PARTIAL_FOLDERS:
        (cache / entry).mkdir(parents=True)
    for entry in PARTIAL_FILES:
        (cache / entry).parent.mkdir(parents=True, exist_ok=True)
        (cache / entry).write_text("partial", encoding="utf-8")


def planted_repository(tmp_path: Path) -> Path:
    """A repository folder as export writes one (a config, a version folder, the export's stamp)."""
    repository = tmp_path / "repository"
    (repository / "multi_io" / "1").mkdir(parents=True)
    (repository / "multi_io" / "config.pbtxt").write_text('name: "multi_io"\n', encoding="utf-8")
    (repository / "multi_io" / STAMP).write_text("{}", encoding="utf-8")
    return repository


def test_a_clean_fault_counts_nothing(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _whole_cache(cache)
    run = FaultRun(
        fault="none",
        stage="x",
        bound_s=1,
        folder=tmp_path,
        repository=planted_repository(tmp_path),
        cache=cache,
    )
    counts, left = run.count_leftovers()
    assert left == []
    assert not any(counts.values())


def test_one_leftover_of_each_kind_is_counted(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _whole_cache(cache)
    repository = planted_repository(tmp_path)
    run = FaultRun(fault="planted", stage="x", bound_s=1, folder=tmp_path, repository=repository, cache=cache)
    sleeper = subprocess.Popen(["sleep", "60"], env=run.env, start_new_session=True)  # a process of the fault
    try:
        (run.tmp / "tritonpt-served-abc").mkdir()
        (run.tmp / "tritonserver-log-def").write_text("", encoding="utf-8")
        (repository / ".staging-1234").mkdir()
        (repository / "multi_io" / f"{STAMP}.partial").write_text("{", encoding="utf-8")
        (repository / SPLIT_FILE).with_suffix(".partial").write_text("{", encoding="utf-8")
        _plant(cache)
        assert marked_processes(run.marker), "the planted process carries the fault's marker"
        counts, left = run.count_leftovers(settle_s=0.5)  # the planted process stays: no use waiting for it
    finally:
        sleeper.kill()
        sleeper.wait()
    assert counts["processes"] == 1
    assert counts["temp_dirs"] == 2
    assert counts["staging_dirs"] == 1
    assert counts["partial_files"] == 2
    assert sorted(e.removeprefix(f"{cache}/") for e in left if e.startswith(str(cache))) == sorted(PARTIAL)
    assert counts["partial_cache"] == len(PARTIAL)
    assert f"multi_io/{STAMP}.partial" in left


def test_the_users_cache_counts_what_the_fault_left_and_not_what_was_there(tmp_path: Path) -> None:
    """The bench fills the user's cache (perf_analyzer into tools/, its wheel into wheels/); other work may share
    that cache, so what was there before the fault is not the fault's."""
    users = tmp_path / "users-cache"
    _whole_cache(users)
    (users / "backends" / ".build-someone-elses").mkdir()
    run = FaultRun(
        fault="bench",
        stage="x",
        bound_s=1,
        folder=tmp_path,
        repository=None,
        env={"TRITONPT_CACHE": str(users)},
    )
    assert run.cache is None
    assert run.cache_root == users
    (users / "tools" / ".perf_analyzer-2.51.0-k1l2").mkdir()
    (users / "wheels" / ".tritonclient.whl.m3n4").write_text("", encoding="utf-8")
    counts, left = run.count_leftovers()
    assert counts["partial_cache"] == 2
    assert sorted(left) == sorted(
        [f"{users}/tools/.perf_analyzer-2.51.0-k1l2", f"{users}/wheels/.tritonclient.whl.m3n4"]
    )
