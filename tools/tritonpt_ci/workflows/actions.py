"""The actions the workflows pin, served to act from a folder of their tarballs instead of GitHub.

    folder()                        $TRITONPT_ACTIONS, else ../shared/third_party/actions where it exists, else None
    prepare(folder, pinned, into)   every pinned action checked against the index (versions.toml [workflows.actions])
                                    and its tarball against its sha256, unpacked once per commit into ``into``;
                                    returns act's ``--local-repository NAME@COMMIT=DIR`` arguments

A workflow that pins an action or a commit the index lacks is refused, naming the workflow, the job and the step.
Without a folder act fetches each action from GitHub at its pinned commit.
"""

from __future__ import annotations

import os
import tarfile
from collections.abc import Sequence
from pathlib import Path

from tritonpt import fetch, scratch
from tritonpt.errors import HINT
from tritonpt.versions import VERSIONS, Action
from tritonpt_ci.workflows.spec import Pinned, WorkflowsError

ACTIONS_ENV = "TRITONPT_ACTIONS"
MIRROR = Path("../shared/third_party/actions")
"""Where the machines of this project keep the tarballs, relative to the checkout."""


def folder(root: Path = Path()) -> Path | None:
    """``$TRITONPT_ACTIONS``, else the mirror beside the checkout where it exists, else None (act fetches them)."""
    if os.environ.get(ACTIONS_ENV):
        return Path(os.environ[ACTIONS_ENV])
    mirror = (root / MIRROR).resolve()
    return mirror if mirror.is_dir() else None


def indexed(pinned: Sequence[Pinned], index: Sequence[Action] = VERSIONS.workflows.actions) -> list[Action]:
    """The index's entry of every action pinned, once each; ``WorkflowsError`` naming every pin it lacks."""
    wanted: dict[tuple[str, str], Action] = {}
    missing: list[str] = []
    for pin in pinned:
        action = next((a for a in index if a.name == pin.name and a.commit == pin.ref), None)
        if action is None:
            missing.append(f"{pin.workflow} job {pin.job} step {pin.step}: {pin.name}@{pin.ref}")
        else:
            wanted[(action.name, action.commit)] = action
    if missing:
        msg = (
            f"Cannot run the workflows, as they pin {len(missing)} action(s) the index lacks: "
            + "; ".join(missing)
            + f".\n{HINT} pin the commits of versions.toml [workflows.actions], or add the action there with the "
            "sha256 of its tarball (and put the tarball in the actions folder)."
        )
        raise WorkflowsError(msg)
    return list(wanted.values())


def prepare(source: Path, actions: Sequence[Action], into: Path) -> list[str]:
    """Each action's tarball from ``source``, its sha256 checked, unpacked into ``into/<name>-<commit>/`` (kept
    between runs: an unpacked folder is reused only beside a marker holding the same sha256); act's arguments."""
    args: list[str] = []
    for action in actions:
        tarball = source / action.tarball
        if not tarball.is_file():
            msg = (
                f"Cannot serve {action.name}@{action.commit} ({action.tag}) to act, as there is no {action.tarball} in "
                f"{source} (${ACTIONS_ENV}).\n{HINT} put the tarball of that commit there, or unset ${ACTIONS_ENV} "
                "to let act fetch the actions from GitHub."
            )
            raise WorkflowsError(msg)
        digest = fetch.sha256(tarball)
        if digest != action.sha256:
            msg = (
                f"Cannot use {tarball} as {action.name}@{action.commit} ({action.tag}): its sha256 is {digest}, not "
                f"the pinned {action.sha256} (versions.toml [workflows.actions]).\n{HINT} replace it with the "
                "tarball the pin was taken from, or fix the pin if the action changed on purpose."
            )
            raise WorkflowsError(msg)
        unpacked = into / tarball.name.removesuffix(".tar.gz")
        marker = unpacked / ".tritonpt-sha256"
        if not (marker.is_file() and marker.read_text(encoding="utf-8").strip() == digest):
            _unpack(tarball, unpacked, digest)
        args += ["--local-repository", f"{action.name}@{action.commit}={unpacked}"]
    return args


def _unpack(tarball: Path, target: Path, digest: str) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    with scratch.folder(f".{target.name}-", inside=target.parent) as staging:
        made = staging / "made"
        made.mkdir()
        with tarfile.open(tarball) as archive:
            archive.extractall(made, filter="data")
        (made / ".tritonpt-sha256").write_text(digest + "\n", encoding="utf-8")
        if target.exists():
            target.replace(staging / "old")
        made.replace(target)
