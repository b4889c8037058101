"""A new user's stock machine: Debian from debootstrap with python3, git and only the packages the README names,
as a Docker image; the README's command lines run in it as written (tests/system/test_readme_stock.py).

    the_two_commands(readme), readme_packages(readme)     read from README.md itself
    build(client, suite=..., packages=...)                tritonpt-stock:<suite>-<hash>
    run(client, tag, command, ...)                        in a container of it, as this user, in a fresh clone

It keeps what a person's machine keeps, its own ~/.cache (uv's and pip's downloads, its tritonpt cache), apart
from this host's.
"""

from __future__ import annotations

import os
import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import requests
from markdown_it import MarkdownIt

from tritonpt import caches, image
from tritonpt.errors import ImageError
from tritonpt.image import DockerClient
from tritonpt_ci.standin import debian
from tritonpt_ci.standin.images import digest, existing

HEADING = "The two commands"
REPOSITORY = "tritonpt-stock"
"""Every stock machine is a tag of this repository (not the stand-ins', whose pruning keeps only its own)."""
HOME = "/home/user"
DEBIAN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""A Debian user's PATH (the base image's)."""
SOURCES = "/sources"
PACKAGES = ("git",)
"""Besides the base's python3 and ca-certificates: what a user has who cloned the repository."""
NETWORK = (
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "PIP_INDEX_URL",
    "UV_INDEX_URL",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
)
"""How this machine reaches the package index (its proxy, the CA bundle it trusts), passed on where set, each file
or folder they name mounted read-only at its own path: the network is the machine's, not the user's."""


def _tokens(readme: Path) -> list[Any]:
    return list(MarkdownIt().parse(readme.read_text(encoding="utf-8")))


def _section(readme: Path) -> list[Any]:
    """The tokens under the heading "The two commands", up to the next heading."""
    tokens = _tokens(readme)
    inside: list[Any] = []
    under = False
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            if under:
                break
            under = tokens[index + 1].content.strip() == HEADING
        elif under:
            inside.append(token)
    if not inside:
        msg = f"{readme}: no heading {HEADING!r} with anything under it"
        raise ImageError(msg)
    return inside


def the_two_commands(readme: Path) -> list[str]:
    """The command lines of the first ``bash`` block under "The two commands" (comments left out)."""
    for token in _section(readme):
        if token.type == "fence" and token.info.strip() == "bash":
            return [
                line.strip()
                for line in token.content.splitlines()
                if line.strip() and not line.strip().startswith("#")
            ]
    msg = f"{readme}: no ```bash block under the heading {HEADING!r}"
    raise ImageError(msg)


def readme_packages(readme: Path) -> tuple[str, ...]:
    """The packages of the first ``apt-get install`` in inline code under "The two commands"."""
    for token in _section(readme):
        for child in token.children or ():
            words = shlex.split(child.content) if child.type == "code_inline" else []
            words = words[1:] if words[:1] == ["sudo"] else words
            if words[:2] == ["apt-get", "install"]:
                return tuple(w for w in words[2:] if not w.startswith("-"))
    msg = f"{readme}: no `apt-get install ...` under the heading {HEADING!r}"
    raise ImageError(msg)


def tag_of(suite: str, packages: tuple[str, ...]) -> str:
    """``tritonpt-stock:<suite>-<hash of its base's tag and the packages>``."""
    base = debian.base_tag(debian.debian_mirror(), suite)
    return f"{REPOSITORY}:{suite}-{digest({'base': base, 'packages': [*PACKAGES, *packages]})}"


def why_not(client: DockerClient, *, suite: str, packages: tuple[str, ...]) -> str:
    """Why the stock machine cannot be made here (its image missing, and no debootstrap or not root), with the
    fix; "" when it is there or can be."""
    try:
        tag = tag_of(suite, packages)
    except ImageError as exc:  # no Debian mirror in this host's apt sources (Ubuntu, say)
        return str(exc)
    if existing(client, tag) is not None:
        return ""
    return debian.cannot_debootstrap()


def build(
    client: DockerClient,
    *,
    suite: str,
    packages: tuple[str, ...],
    on_line: image.OnLine | None = None,
) -> str:
    """``tritonpt-stock:<suite>-<hash>``: Debian ``suite`` from debootstrap (the stand-ins' base recipe) with git
    and ``packages`` installed by apt, as a user would (recommended packages too); built once per suite, mirror and
    package list (the base only then: the stand-ins' pruning may have taken another suite's)."""
    tag = tag_of(suite, packages)
    if existing(client, tag) is not None:
        caches.note("image", f"stock {tag}", hit=True)
        return tag
    started = time.perf_counter()
    base = debian.build_base(client, suite=suite, on_line=on_line).tag  # the tag tag_of hashed
    recipe = (
        f"FROM {base}\n"
        'SHELL ["/bin/bash", "-o", "pipefail", "-c"]\n'
        f"RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y {shlex.join((*PACKAGES, *packages))} "
        "&& rm -rf /var/lib/apt/lists/*\n"
    )
    image.run_build(client, tag=tag, build_args={}, dockerfile=recipe, on_line=on_line)
    for found in client.images.list(name=REPOSITORY):  # the same suite's older package lists
        for old in found.tags:
            if old.startswith(f"{REPOSITORY}:{suite}-") and old != tag:
                client.images.remove(old, noprune=False)
    caches.note("image", f"stock {tag}", hit=False, seconds=time.perf_counter() - started)
    return tag


def cache_of(suite: str) -> Path:
    """The stock machine's ``~/.cache``, a folder of this host's tritonpt cache (made here if missing)."""
    folder = caches.root() / "stock" / suite
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@dataclass(frozen=True, kw_only=True)
class Ran:
    """A command's run on the stock machine."""

    code: int
    output: str
    seconds: float


def run(
    client: DockerClient,
    tag: str,
    command: str,
    *,
    clone: str,
    home: Path,
    suite: str,
    sources: Path | None,
    timeout: float,
    python: Path | None = None,
    on_line: Callable[[str], None] | None = None,
) -> Ran:
    """``command`` in ``bash -euo pipefail`` in a container of ``tag``, as this process's user, in ``home/clone``
    (a fresh clone there already): ``home`` is the user's home; its ``~/.cache`` (uv's and pip's downloads, its
    tritonpt cache) is :func:`cache_of` the suite, kept between runs as a person's machine keeps it, and nothing
    of this host's own caches. The host's network (the package index, through :data:`NETWORK`). ``python``: a
    CPython prefix of this host's, for a suite whose own Python is not the one the sessions run on (Debian 13's
    3.13): mounted at its own path and put last on PATH, it stands in for the build uv fetches on a user's machine
    (python-build-standalone, which this machine cannot reach); uv may fetch none."""
    volumes = {
        str(home): {"bind": HOME, "mode": "rw"},
        str(cache_of(suite)): {"bind": f"{HOME}/.cache", "mode": "rw"},
    }
    environment = {"HOME": HOME, "LANG": "C.UTF-8"}
    for name in NETWORK:
        if name in os.environ:
            environment[name] = os.environ[name]
            if Path(os.environ[name]).is_absolute() and Path(os.environ[name]).exists():
                volumes[os.environ[name]] = {"bind": os.environ[name], "mode": "ro"}
    if python is not None:
        if python.resolve() in (Path("/usr"), Path("/usr/local"), Path("/")):
            msg = (
                f"Cannot hand the stock machine {python} as its CPython 3.11: it is this host's system prefix, and "
                "mounted there it would replace the machine's own userland. Run the test with a CPython 3.11 of "
                "its own prefix (pyenv, or `uv python install 3.11`)."
            )
            raise ImageError(msg)
        volumes[str(python)] = {"bind": str(python), "mode": "ro"}
        environment["PATH"] = f"{DEBIAN_PATH}:{python / 'bin'}"
        environment["UV_PYTHON_DOWNLOADS"] = "never"
    if sources is not None:  # CI reaches no GitHub: the pinned tarballs, as the README says to point at them
        volumes[str(sources)] = {"bind": SOURCES, "mode": "ro"}
        environment["TRITONPT_SOURCES"] = SOURCES
    started = time.perf_counter()
    container = client.containers.run(
        tag,
        ["bash", "-euo", "pipefail", "-c", command],
        detach=True,
        user=f"{os.getuid()}:{os.getgid()}",
        working_dir=f"{HOME}/{clone}",
        environment=environment,
        volumes=volumes,
        network_mode="host",
        shm_size="1g",
        labels={image.LABEL_STANDIN: "stock"},
    )
    lines: list[str] = []

    def read() -> None:
        for chunk in container.logs(stream=True, follow=True):
            for line in chunk.decode(errors="replace").splitlines():
                lines.append(line)
                if on_line is not None:
                    on_line(line)

    reader = threading.Thread(target=read, name="stock-output", daemon=True)
    reader.start()
    try:
        code = int(container.wait(timeout=timeout).get("StatusCode", 1))
        reader.join(timeout=30.0)  # the log stream ends with the container: its last lines are the verdict
    except requests.exceptions.RequestException as exc:  # a read timeout: past ``timeout``
        msg = f"`{command}` did not end within {timeout:.0f} s on {tag}; its last lines:\n" + "\n".join(
            lines[-30:]
        )
        raise ImageError(msg) from exc
    finally:
        container.remove(force=True)
        reader.join(timeout=10.0)
    return Ran(code=code, output="\n".join(lines), seconds=time.perf_counter() - started)
