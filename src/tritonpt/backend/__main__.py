"""``python3 -m tritonpt.backend``: the builds `invoke build-backend` makes, with its options (it takes no repository,
so the PT2 build is made only when asked), on nothing but the standard library (docker/pytorch.Dockerfile)."""

from __future__ import annotations

import argparse
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from tritonpt.backend import pins
from tritonpt.backend.build import ensure
from tritonpt.backend.flavor import STOCK, patched
from tritonpt.backend.layout import CACHE_ENV, LIBRARY, MANIFEST, quiet
from tritonpt.backend.serving import PT2_LIBRARY, PT2_NAME
from tritonpt.errors import BackendError
from tritonpt.options import add_arguments
from tritonpt.versions import VERSIONS


def main(argv: Sequence[str] | None = None) -> int:
    """``python3 -m tritonpt.backend``: build (or find in the cache) the backends `invoke build-backend` builds, with
    its options (tritonpt.options); print each build's folder."""
    parser = argparse.ArgumentParser(
        prog="python3 -m tritonpt.backend",
        description="Build the official Triton pytorch backend (libtriton_pytorch.so) from the sources pinned in "
        "versions.toml, against this environment's torch; reuse the cached build when nothing changed.",
    )
    add_arguments(parser.add_argument, ("sources", "variant", "force", "pt2", "pt2_build", "sanitize"))
    parser.add_argument(
        "--cache", type=Path, help=f"cache folder (default ${CACHE_ENV} or ~/.cache/tritonpt)"
    )
    parser.add_argument(
        "--copy-to", type=Path, help="then copy each build into this backends folder (the PT2 build as pt2/)"
    )
    parser.add_argument("--quiet", action="store_true", help="print only the build folders")
    parser.add_argument(
        "--pin-trees",
        type=Path,
        metavar="DIR",
        help="maintainers: write the file manifests of the pinned tarballs in DIR and print their tree digests",
    )
    options = parser.parse_args(argv)
    if options.pin_trees is not None:
        return _pin_trees(options.pin_trees)

    def echo(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    sanitizer = options.sanitize or None
    builds = [
        VERSIONS.backend,
        *([VERSIONS.pt2.build] if options.pt2 or options.pt2_build == "patched" else []),
    ]
    for build in builds:
        try:
            ours = build is VERSIONS.pt2.build and options.pt2_build == "patched"
            flavor = patched(build, sanitizer=sanitizer) if ours else STOCK.with_sanitizer(sanitizer)
            built = ensure(
                sources=Path(options.sources) if options.sources else None,
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
        # the PT2 build goes in under its second name, as serving.py installs it
        if options.copy_to is not None:
            name, library = (PT2_NAME, PT2_LIBRARY) if build is VERSIONS.pt2.build else ("pytorch", LIBRARY)
            target = options.copy_to / name
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(built.library, target / library)
            shutil.copy2(built.directory / MANIFEST, target / MANIFEST)
        print(built.directory)
    return 0


def _pin_trees(folder: Path) -> int:
    """``--pin-trees DIR``: the pinned tarballs' manifests written in ``folder``, their tree digests printed."""
    try:
        for build in (VERSIONS.backend, VERSIONS.pt2.build):
            for name, tree in pins.write_manifests(folder, build.sources).items():
                print(f'{build.label} {name}: tree = "{tree}"')
        for suite in VERSIONS.qa:  # Triton's own QA tests (tritonpt_ci.qa)
            for name, tree in pins.write_manifests(folder, (suite.source,)).items():
                print(f'qa {suite.source.ref} {name}: tree = "{tree}"')
    except BackendError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
