"""Builds of their own name: our patches and a sanitizer change the key, the label and what find() returns;
stock keys stay as they were; a patch that no longer applies is an error that names it, with the tree untouched.

The patches are applied for real with GNU patch to a small tree; nothing is compiled.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from tritonpt import backend
from tritonpt.backend import BuiltBackend, Flavor, Toolchain, Torch, flavor, toolchain
from tritonpt.errors import BackendError
from tritonpt.versions import VERSIONS

from ..prerequisites import missing
from .conftest import MakeBackend

ORIGINAL = "int main() {\n  return 1;\n}\n"
PATCH = """\
--- a/main.cc
+++ b/main.cc
@@ -1,3 +1,3 @@
 int main() {
-  return 1;
+  return 0;
 }
"""


@pytest.fixture
def needs_patch() -> None:
    """The patches are applied with GNU patch, as a build applies them."""
    if shutil.which("patch") is None:
        missing("GNU patch", "apt-get install patch")


def _series(root: Path, *patches: tuple[str, str]) -> Path:
    folder = root / VERSIONS.pt2.build.patches
    folder.mkdir(parents=True)
    for name, text in patches:
        (folder / name).write_text(text, encoding="utf-8")
    lines = ["# comment lines and blank lines are not patches", "", *(name for name, _ in patches)]
    (folder / flavor.SERIES).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def test_labels_name_what_a_build_changes() -> None:
    patch = flavor.Patch(name="0001-x.patch", path=Path("0001-x.patch"), sha256="0" * 64)
    assert backend.STOCK.label == ""
    assert backend.STOCK.stock
    assert Flavor(patch_set="tritonpt.1", patches=(patch,)).label == "+tritonpt.1"
    assert Flavor(sanitizer="address").label == "+asan"
    assert (
        Flavor(patch_set="tritonpt.1", patches=(patch,), sanitizer="undefined").label == "+tritonpt.1+ubsan"
    )
    assert not Flavor(sanitizer="address").stock


def test_stock_keys_are_unchanged_and_every_flavor_has_its_own(tmp_path: Path) -> None:
    torch, toolchain = Torch.locate(), Toolchain.find("cpu")
    pins = VERSIONS.pt2.build
    stock = backend.build_key(torch, toolchain, "cpu", pins)
    assert backend.build_key(torch, toolchain, "cpu", pins, backend.STOCK) == stock
    _series(tmp_path, ("0001-fix.patch", PATCH))
    patched = backend.patched(pins, root=tmp_path)
    source = pins.pytorch_backend
    keys = {
        backend.build_key(torch, toolchain, "cpu", pins, patched),
        backend.build_key(torch, toolchain, "cpu", pins, backend.STOCK.with_sanitizer("address")),
        backend.build_key(torch, toolchain, "cpu", pins, backend.STOCK.with_sanitizer("undefined")),
        backend.build_key(torch, toolchain, "cpu", pins, patched.with_sanitizer("address")),
    }
    assert stock not in keys
    assert len(keys) == 4
    assert backend.build_key(torch, toolchain, "cpu", pins, patched).startswith(
        f"{source.ref}+{pins.patch_set}-{source.commit[:7]}-"
    )
    # an edited patch is another build
    (tmp_path / pins.patches / "0001-fix.patch").write_text(
        PATCH.replace("return 0", "return 2"), encoding="utf-8"
    )
    edited = backend.patched(pins, root=tmp_path)
    assert backend.build_key(torch, toolchain, "cpu", pins, edited) != backend.build_key(
        torch, toolchain, "cpu", pins, patched
    )


def test_the_sanitizer_adds_its_flags_to_the_configure_line(tmp_path: Path) -> None:
    torch, toolchain = Torch.locate(), Toolchain.find("cpu")
    dirs = {name: tmp_path / name for name in ("pytorch_backend", "common", "core", "backend", "googletest")}

    def line(flavor: Flavor) -> list[str]:
        return backend.configure_command(
            source_dirs=dirs,
            build_dir=tmp_path / "build",
            prefix=tmp_path / "prefix",
            torch=torch,
            toolchain=toolchain,
            variant="cpu",
            flavor=flavor,
        )

    sanitized = line(backend.STOCK.with_sanitizer("address"))
    cxx = next(arg for arg in sanitized if arg.startswith("-DCMAKE_CXX_FLAGS="))
    assert "-fsanitize=address" in cxx
    assert f"-isystem {tmp_path / 'prefix' / 'include'}" in cxx
    assert "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address -fno-omit-frame-pointer -g" in sanitized
    assert "-DCMAKE_BUILD_TYPE=RelWithDebInfo" in sanitized
    assert not [arg for arg in line(backend.STOCK) if "-fsanitize" in arg]


def test_find_returns_the_flavor_asked_for_and_never_another(
    make_backend: MakeBackend, tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    stock = make_backend(key="r25.10-3281319-torchX-cpu-aaaaaaaaaaaa", cache=cache)
    sanitized = make_backend(key="r25.10+asan-3281319-torchX-cpu-bbbbbbbbbbbb", cache=cache)
    manifest = sanitized.directory / backend.MANIFEST
    data = json.loads(manifest.read_text(encoding="utf-8"))
    manifest.write_text(json.dumps({**data, "flavor": "+asan", "sanitizer": "address"}), encoding="utf-8")
    asan = backend.STOCK.with_sanitizer("address")
    assert backend.find("cpu", cache=cache) == BuiltBackend.read(stock.directory)
    found = backend.find("cpu", cache=cache, flavor=asan)
    assert found is not None
    assert found.directory == sanitized.directory
    assert found.origin.build == "r25.10+asan"
    assert "pytorch_backend r25.10+asan (3281319)" in found.describe()
    assert backend.find("cpu", cache=cache, flavor=backend.STOCK.with_sanitizer("undefined")) is None
    # a manifest written before flavors existed reads as stock
    data.pop("flavor", None)
    assert BuiltBackend.read(stock.directory).flavor == ""


def test_the_series_is_read_in_order_and_what_is_missing_is_named(tmp_path: Path) -> None:
    pins = VERSIONS.pt2.build
    folder = _series(tmp_path, ("0002-b.patch", PATCH), ("0001-a.patch", PATCH))
    patched = backend.patched(pins, root=tmp_path)
    assert [p.name for p in patched.patches] == ["0002-b.patch", "0001-a.patch"]
    assert patched.label == f"+{pins.patch_set}"
    (folder / "0001-a.patch").unlink()
    with pytest.raises(BackendError, match=r"Cannot read .*0001-a\.patch, which .*series lists"):
        backend.patched(pins, root=tmp_path)
    (folder / flavor.SERIES).write_text("# nothing\n", encoding="utf-8")
    with pytest.raises(BackendError, match="lists no patch"):
        backend.patched(pins, root=tmp_path)
    with pytest.raises(BackendError, match="names no patch set for it"):
        backend.patched(VERSIONS.backend, root=tmp_path)


@pytest.mark.usefixtures("needs_patch")
def test_patches_apply_in_order_to_the_tree(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "main.cc").write_text(ORIGINAL, encoding="utf-8")
    _series(tmp_path / "patches", ("0001-fix.patch", PATCH))
    patched = backend.patched(VERSIONS.pt2.build, root=tmp_path / "patches")
    applied = list(flavor.apply(patched, tree))
    assert [name for name, _ in applied] == ["0001-fix.patch"]
    assert (tree / "main.cc").read_text(encoding="utf-8") == ORIGINAL.replace("return 1", "return 0")


@pytest.mark.usefixtures("needs_patch")
def test_a_patch_that_no_longer_applies_names_itself_and_changes_nothing(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    moved = ORIGINAL.replace("return 1", "return 7")  # the pinned source moved under the patch
    (tree / "main.cc").write_text(moved, encoding="utf-8")
    _series(tmp_path / "patches", ("0001-fix.patch", PATCH))
    patched = backend.patched(VERSIONS.pt2.build, root=tmp_path / "patches")
    with pytest.raises(BackendError) as failure:
        list(flavor.apply(patched, tree))
    text = str(failure.value)
    assert "0001-fix.patch" in text
    assert "no longer applies" in text
    assert "Hunk #1 FAILED" in text
    assert "Hint: refresh it against the pinned sources" in text
    assert (tree / "main.cc").read_text(encoding="utf-8") == moved
    assert sorted(p.name for p in tree.iterdir()) == ["main.cc"]  # no .rej, no .orig


def test_a_build_records_its_flavor_in_its_manifest(make_backend: MakeBackend) -> None:
    built = make_backend(key="r26.05+tritonpt.1-55bbe27-torchX-cpu-cccccccccccc")
    tagged = replace(built, flavor="+tritonpt.1", patches=("0001-fix.patch " + "0" * 64,))
    (tagged.directory / backend.MANIFEST).write_text(json.dumps(tagged.manifest()), encoding="utf-8")
    again = BuiltBackend.read(tagged.directory)
    assert again.flavor == "+tritonpt.1"
    assert again.patches == tagged.patches
    assert again.origin.build == f"{again.ref}+tritonpt.1"


@pytest.mark.parametrize(("sanitizer", "name"), [("address", "libasan.so"), ("undefined", "libubsan.so")])
def test_a_sanitizer_runtime_is_the_compilers_own(sanitizer: str, name: str) -> None:
    runtime = toolchain.sanitizer_runtime(sanitizer)
    assert runtime.is_file()
    assert runtime.name.startswith(name)  # libasan.so.8: the file the symlink names


def test_a_compiler_without_the_runtime_is_an_error_that_says_what_to_do(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fake = tmp_path / "c++"
    fake.write_text("#!/bin/sh\necho libasan.so\n", encoding="utf-8")  # what GCC prints for a file it lacks
    fake.chmod(0o755)
    monkeypatch.setenv("CXX", str(fake))
    with pytest.raises(BackendError) as caught:
        toolchain.sanitizer_runtime("address")
    assert "libasan.so" in str(caught.value)
    assert "--sanitize" in str(caught.value)


def test_a_served_sanitizer_is_preloaded_first_and_the_environments_settings_win() -> None:
    env = {"LD_PRELOAD": "/opt/mine.so", "ASAN_OPTIONS": "detect_leaks=1"}
    added = backend.sanitizer_environment(["address"], env)
    preload = added["LD_PRELOAD"].split(" ")
    assert preload[0] == str(toolchain.sanitizer_runtime("address"))
    assert preload[1:] == ["/opt/mine.so"]
    assert added["ASAN_OPTIONS"] == "detect_leaks=1"
    assert "abort_on_error=1" in backend.sanitizer_environment(["address"], {})["ASAN_OPTIONS"]
    assert "UBSAN_OPTIONS" in backend.sanitizer_environment(["undefined"], {})


@pytest.mark.parametrize(
    ("label", "patches"),
    [
        ("", ""),
        ("+asan", ""),
        ("+ubsan", ""),
        ("+tritonpt.1", "+tritonpt.1"),
        ("+tritonpt.1+asan", "+tritonpt.1"),
    ],
)
def test_an_instrumented_build_serves_as_the_build_it_instruments(label: str, patches: str) -> None:
    origin = backend.Origin(ref="r26.05", commit="0" * 40, torch="2.9.1", variant="cpu", flavor=label)
    assert origin.patches == patches
    assert origin.build == f"r26.05{label}"  # the reports still name the instrumented build
