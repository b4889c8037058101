"""``python -m tritonpt_ci.standin``: the command line that builds the stand-ins in order and prints their
tags, and whether they can be built here at all (``--why-not``, :func:`why_not_base`: no engine, no debootstrap,
not root, each with its fix).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from tritonpt import image
from tritonpt.errors import ImageError, TritonPtError
from tritonpt.image import DockerClient
from tritonpt.options import add_arguments
from tritonpt.versions import VERSIONS
from tritonpt_ci.standin.debian import base_tag, cannot_debootstrap, debian_mirror
from tritonpt_ci.standin.images import existing, prune
from tritonpt_ci.standin.ngc import build_all
from tritonpt_ci.standin.pytorch import build_pytorch_devel
from tritonpt_ci.standin.running import host_mounts, run_settings_example

WHY_NOT = "cannot build the stand-ins: "
"""How ``--why-not``'s reason begins."""


def why_not_base(client: DockerClient, mirror: str | None = None) -> str:
    """Why the stand-in base is neither built nor buildable here, with the command that fixes it; "" when it is
    built, or this process can build it."""
    try:
        tag = base_tag(mirror or debian_mirror())
    except ImageError as exc:
        return f"No Debian mirror to build the stand-in base from: {exc}"
    if existing(client, tag) is not None:
        return ""
    reason = cannot_debootstrap()
    return f"{tag} is not built. {reason}" if reason else ""


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tritonpt_ci.standin``: build the stand-ins and print their tags."""
    parser = argparse.ArgumentParser(
        prog="python -m tritonpt_ci.standin",
        description=(
            "Build, without any registry, a Debian bookworm base (debootstrap + docker import), a Triton "
            f"stand-in on it (server {VERSIONS.embedded.server} from nvidia-pytriton {VERSIONS.embedded.pytriton} "
            "and the official libtriton_pytorch.so built for this torch) and docker/ngc.Dockerfile built on that. "
            "Images already built from the same inputs are reused. Needs root and a Docker engine."
        ),
        epilog=(
            "Run a container from the last tag with the host's torch mounted:\n  "
            + " ".join(run_settings_example())
            + "\nThen: curl -f http://127.0.0.1:<port of 8000>/v2/health/ready"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--mirror", help="Debian mirror for debootstrap (default: the one apt uses)")
    add_arguments(parser.add_argument, ("sources", "force"))
    parser.add_argument(
        "--no-recipe", action="store_true", help="do not build docker/ngc.Dockerfile on the stand-in"
    )
    parser.add_argument(
        "--pytorch-devel",
        action="store_true",
        help="also build the stand-in of the pytorch recipe's devel base (Debian + g++ + this torch)",
    )
    parser.add_argument(
        "--workdir", type=Path, help="where the rootfs and build contexts go (default: $TMPDIR)"
    )
    parser.add_argument("--prune", action="store_true", help="then remove stand-in images of older inputs")
    parser.add_argument("--quiet", action="store_true", help="do not print build output")
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    parser.add_argument(
        "--print-mount",
        action="store_true",
        help="print only the --mount a container of a stand-in needs (the host's site-packages), and build nothing",
    )
    parser.add_argument(
        "--print-tag",
        choices=("base", "triton", "ngc", "pytorch-devel"),
        help="print only this image's tag on stdout (for scripts: the ngc one is what the container lane runs)",
    )
    parser.add_argument(
        "--why-not",
        type=Path,
        metavar="FILE",
        help="write why the stand-ins cannot be built here (no engine, no debootstrap, not root), with the fix, "
        "into FILE (left empty when they can be built), and build nothing",
    )
    options = parser.parse_args(argv)
    if options.print_mount:
        print(" ".join(m.volume() for m in host_mounts()))
        return 0
    if options.why_not is not None:
        try:
            reason = why_not_base(image.docker_client(), options.mirror)
        except TritonPtError as exc:
            reason = str(exc)
        options.why_not.write_text(f"{WHY_NOT}{reason}" if reason else "", encoding="utf-8")
        return 0

    def echo(line: str) -> None:
        print(f"  {line}", file=sys.stderr)

    try:
        client = image.docker_client()
        built = build_all(
            client,
            mirror=options.mirror,
            sources=Path(options.sources) if options.sources else None,
            recipe=not options.no_recipe,
            force=options.force,
            workdir=options.workdir,
            on_line=None if options.quiet else echo,
        )
        if options.pytorch_devel:
            built.append(
                build_pytorch_devel(
                    client,
                    base=built[0].tag,
                    workdir=options.workdir,
                    force=options.force,
                    on_line=None if options.quiet else echo,
                )
            )
        removed = prune(client, keep=[b.tag for b in built]) if options.prune else []
    except TritonPtError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if options.print_tag:
        tag = next((b.tag for b in built if b.role == options.print_tag), None)
        if tag is None:
            print(
                f"error: --print-tag {options.print_tag} needs --pytorch-devel, which builds it.",
                file=sys.stderr,
            )
            return 2
        print(tag)
    elif options.json:
        print(json.dumps({"images": [vars(b) for b in built], "removed": removed}, indent=2))
    else:
        for b in built:
            state = "cached" if b.cached else f"built in {b.seconds:.1f}s"
            print(f"{b.role:7} {b.tag}  {b.size / 1e6:.0f} MB  {state}")
        for tag in (r for r in removed if not r.startswith("sha256:")):
            print(f"removed {tag}")
        if untagged := sum(r.startswith("sha256:") for r in removed):
            print(f"removed {untagged} untagged stand-in layers")
    return 0
