"""The GPU runners' lane (`nox -s gpu`): the real image built from a recipe, the doctor on it, then the matrix in a
container that gets every GPU, the official backend required.

    python -m tritonpt_ci.gpu [--recipe ngc|pytorch] [the matrix's options and pytest's: --shard K/N, -k ...]

The built-in set is exported first (a shard's part with --shard), TorchScript only: the ngc recipe's release
serves no torch_aoti. Each step is a front door run as a person runs it; the first that fails ends the lane.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from tritonpt import stopping
from tritonpt.matrix import settings
from tritonpt.options import DEFAULT_REPOSITORY, add_arguments
from tritonpt.versions import VERSIONS


def steps(argv: Sequence[str]) -> list[list[str]]:
    """The lane's commands for ``argv``, in order: export (into model_repository/ only, as ``--export-builtin``
    does), build-image, doctor, the matrix."""
    parser = argparse.ArgumentParser(prog="python -m tritonpt_ci.gpu", add_help=False)
    add_arguments(parser.add_argument, ("recipe",))
    options, rest = parser.parse_known_args(list(argv))
    known, _ = settings.parser().parse_known_args(
        rest
    )  # as the matrix declares them; the matrix itself checks them
    repository = known.repository
    shard = ["--shard", known.shard] if known.shard else []
    shard += ["--shard-costs", known.shard_costs] if known.shard_costs else []
    tag = f"{VERSIONS.image_repository}:{options.recipe}-ci"
    front_door = [sys.executable, "-m", "tritonpt"]
    in_a_gpu_container = ["--target", "container", "--image", tag, "--gpus", "all", "--strict-backend"]
    ours = Path(repository).resolve() == DEFAULT_REPOSITORY.resolve()  # else the user's, checked as it is
    export = [[*front_door, "export", "--repository", repository, *shard]] if ours else []
    return [
        *export,
        [*front_door, "build-image", "--recipe", options.recipe, "--tag", tag],
        [*front_door, "doctor", "--image", tag, "--repository", repository],
        [sys.executable, "-m", "tritonpt.matrix", *in_a_gpu_container, *rest],
    ]


STOP_S = 60.0
"""How long a stopped step has to stop its server or container, before SIGKILL."""


def main(argv: Sequence[str] | None = None) -> int:
    """Each step in turn; the exit status of the first that fails, else 0. A stop goes on to the step running (in
    a session of its own, so that it gets it once, from here) and ends the lane with 128 + its number."""
    with stopping.stop_signals_interrupt():
        for command in steps(sys.argv[1:] if argv is None else argv):
            print(f"gpu lane: {' '.join(command[2:])}", file=sys.stderr, flush=True)
            try:
                code = stopping.run_stoppable(command, STOP_S)
            except KeyboardInterrupt as interrupt:
                print("gpu lane: stopped", file=sys.stderr)
                return stopping.exit_code(interrupt)
            if code:
                return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
