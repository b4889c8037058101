"""``python3 -m tritonpt.backend``: what `invoke build-backend` does, with nothing but the standard library."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from tritonpt.backend import pins
from tritonpt.backend.build import ensure
from tritonpt.backend.flavor import SANITIZERS, STOCK, patched
from tritonpt.backend.layout import CACHE_ENV, CHOICES, LIBRARY, MANIFEST, SOURCES_ENV, quiet
from tritonpt.backend.serving import PT2_LIBRARY, PT2_NAME
from tritonpt.errors import BackendError
from tritonpt.versions import VERSIONS

# --- Command line (also run inside docker/pytorch.Dockerfile) -----------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python3 -m tritonpt.backend``: build (or find in the cache) the backend; print its folder."""
    parser = argparse.ArgumentParser(
        prog="python3 -m tritonpt.backend",
        description="Build the official Triton pytorch backend (libtriton_pytorch.so) from the sources pinned in "
        "versions.toml, against this environment's torch; reuse the cached build when nothing changed.",
    )
    parser.add_argument(
        "--sources", type=Path, help=f"folder of the source tarballs (default ${SOURCES_ENV}, else download)"
    )
    parser.add_argument("--variant", choices=CHOICES, default="cpu", help="cpu (default), gpu, or auto")
    parser.add_argument(
        "--cache", type=Path, help=f"cache folder (default ${CACHE_ENV} or ~/.cache/tritonpt)"
    )
    parser.add_argument("--force", action="store_true", help="build even when the cache has this build")
    parser.add_argument(
        "--pt2", action="store_true", help="build the PT2 (torch_aoti) build, pytorch_backend [pt2], instead"
    )
    parser.add_argument(
        "--pt2-patches",
        action="store_true",
        help="the PT2 build with our patches (versions.toml [pt2] patch_set), a build of its own name",
    )
    parser.add_argument("--sanitize", choices=SANITIZERS, help="instrument the build with ASan or UBSan")
    parser.add_argument(
        "--copy-to", type=Path, help="then copy the pytorch/ folder into this backends folder"
    )
    parser.add_argument("--quiet", action="store_true", help="print only the build folder")
    parser.add_argument(
        "--pin-trees",
        type=Path,
        metavar="DIR",
        help="maintainers: write the file manifests of the pinned tarballs in DIR and print their tree digests",
    )
    options = parser.parse_args(argv)
    if options.pin_trees is not None:
        try:
            for build in (VERSIONS.backend, VERSIONS.pt2.build):
                for name, tree in pins.write_manifests(options.pin_trees, build.sources).items():
                    print(f'{build.label} {name}: tree = "{tree}"')
            for suite in VERSIONS.qa:  # Triton's own QA tests (tritonpt_ci.qa)
                for name, tree in pins.write_manifests(options.pin_trees, (suite.source,)).items():
                    print(f'qa {suite.source.ref} {name}: tree = "{tree}"')
        except BackendError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        return 0

    def echo(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    build = VERSIONS.pt2.build if options.pt2 or options.pt2_patches else VERSIONS.backend
    try:
        flavor = (
            patched(build, sanitizer=options.sanitize)
            if options.pt2_patches
            else STOCK.with_sanitizer(options.sanitize)
        )
        built = ensure(
            sources=options.sources,
            variant=options.variant,
            cache=options.cache,
            force=options.force,
            step=quiet if options.quiet else echo,
            pins=build,
            flavor=flavor,
        )
    except BackendError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if options.copy_to is not None:  # the PT2 build goes in under its second name, as serving.py installs it
        name, library = (PT2_NAME, PT2_LIBRARY) if build is VERSIONS.pt2.build else ("pytorch", LIBRARY)
        target = options.copy_to / name
        target.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built.library, target / library)
        shutil.copy2(built.directory / MANIFEST, target / MANIFEST)
    print(built.directory)
    return 0


if __name__ == "__main__":
    sys.exit(main())
