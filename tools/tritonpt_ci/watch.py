"""`nox -s watch`: the compatibility table keeps up by itself (.github/workflows/compat-watch.yml, weekly).

    python -m tritonpt_ci.watch [--lookups FILE.json] [--reports reports/watch]

PyPI's newest torch and GitHub's newest Triton release, against versions.toml: a torch minor [compat] lacks gets its
row (on the newest pinned line) and its legs (`python -m tritonpt_ci.compat --minor M --write`), a newer release
its row with what its page states. The pull request (each verdict from its run; a leg that cannot build or serve is
a verdict, never a failed run) goes to <reports>/pull-request.md and changes.patch. ``--lookups`` serves the URLs
from a file (CI reaches neither PyPI nor GitHub).
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import shutil
import subprocess
import sys
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonpt.doctor import compat
from tritonpt.operators import registry
from tritonpt.options import add_arguments
from tritonpt.versions import VERSIONS, Versions, minor_of

ROOT = Path(__file__).resolve().parents[2]
TOML = ROOT / "src" / "tritonpt" / "versions.toml"
VERSIONS_PAGE = ROOT / "docs" / "reference" / "versions.md"
PYPROJECT = ROOT / "pyproject.toml"
CHANGED = (TOML, compat.TABLE, ROOT / compat.PAGE, ROOT / registry.PAGE, VERSIONS_PAGE, PYPROJECT)
"""What a run may change: the pull request's files (its text; the registries' compact file beside the patch)."""
PYPI = "https://pypi.org/pypi/{package}/json"
RELEASES = "https://api.github.com/repos/triton-inference-server/server/releases/latest"
_RELEASE_NAME = re.compile(r"Release (\d+\.\d+\.\d+) corresponding to NGC container (\d\d\.\d\d)")


def _say(line: str) -> None:
    print(f"watch: {line}", file=sys.stderr, flush=True)


class Lookups:
    """JSON documents by URL: from the network, or from a file recorded as ``{url: document}``."""

    def __init__(self, recorded: Mapping[str, Any] | None = None) -> None:
        self.recorded = recorded

    def get(self, url: str) -> Any:  # noqa: ANN401 - a JSON document
        if self.recorded is not None:
            if url not in self.recorded:
                msg = f"the lookups file has no answer for {url} (it has {sorted(self.recorded)})"
                raise KeyError(msg)
            return self.recorded[url]
        headers = {"Accept": "application/json", "User-Agent": "tritonpt-watch"}
        request = urllib.request.Request(url, headers=headers)  # noqa: S310 - the https URLs above
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:  # noqa: S310 - the https URLs above
                return json.load(answer)
        except (OSError, ValueError) as exc:  # URLError and HTTPError are OSErrors; a body that is not JSON
            msg = f"cannot ask {url} ({exc}); the table is left as it is. Run it again later, or give --lookups."
            raise LookupFailedError(msg) from exc


class LookupFailedError(Exception):
    """PyPI or GitHub did not answer: nothing is proposed."""


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version.split("+", maxsplit=1)[0])[:3])


def _newest_release(document: Mapping[str, Any]) -> str:
    """The newest final release of a PyPI project's JSON (no pre-release, not yanked)."""
    finals = [
        v
        for v, files in document["releases"].items()
        if re.fullmatch(r"\d+\.\d+\.\d+", v) and files and not all(f.get("yanked") for f in files)
    ]
    return str(max(finals, key=_key))


@dataclass(frozen=True, kw_only=True)
class NewTorch:
    minor: str
    torch: str
    torchvision: str
    line: str


@dataclass(frozen=True, kw_only=True)
class NewRelease:
    ngc: str
    server: str
    page: str


def new_torch(lookups: Lookups, versions: Versions = VERSIONS) -> NewTorch | None:
    """PyPI's newest torch, where its minor is not in [compat]; its torchvision is PyPI's newest."""
    torch = _newest_release(lookups.get(PYPI.format(package="torch")))
    if versions.compat_torch(minor_of(torch)) is not None or _key(torch) <= _key(
        versions.newest_compat.torch
    ):
        return None
    torchvision = _newest_release(lookups.get(PYPI.format(package="torchvision")))
    return NewTorch(
        minor=minor_of(torch),
        torch=torch,
        torchvision=torchvision,
        line=versions.pt2.build.pytorch_backend.ref,
    )


def new_release(lookups: Lookups, versions: Versions = VERSIONS) -> NewRelease | None:
    """GitHub's latest Triton release, where it is newer than every row of the table."""
    latest = lookups.get(RELEASES)
    found = _RELEASE_NAME.search(str(latest.get("name", "")))
    if found is None:
        return None
    server, ngc = found.groups()
    if max(_key(r.server) for r in versions.triton_releases) >= _key(server):
        return None
    return NewRelease(ngc=ngc, server=server, page=str(latest.get("html_url", RELEASES)))


def _insert_after_last(text: str, header: str, block: str) -> str:
    """``block`` after the last ``header`` table of ``text`` and its sub-tables, before the comments that open the
    next table."""
    start = text.rindex(header)
    following = re.compile(r"^\[(?!\[?" + re.escape(header.strip("[]")) + r"\.)", re.MULTILINE)
    after = following.search(text, start + len(header))
    lines = text[: after.start() if after else len(text)].split("\n")
    while lines and (not lines[-1].strip() or lines[-1].startswith("#")):
        lines.pop()
    head = "\n".join(lines) + "\n"
    return head + block + text[len(head) :]


def admit(text: str, torch: NewTorch) -> str:
    """pyproject.toml whose torch and torchvision ranges admit the new torch (the package installs beside it)."""
    minor = int(torch.minor.split(".")[1])
    vision = int(torch.torchvision.split(".")[1])
    text = re.sub(
        r'("torch>=[\d.]+,<2\.)(\d+)(")', lambda m: f"{m[1]}{max(int(m[2]), minor + 1)}{m[3]}", text
    )
    return re.sub(
        r'("torchvision>=[\d.]+,<0\.)(\d+)(")', lambda m: f"{m[1]}{max(int(m[2]), vision + 1)}{m[3]}", text
    )


def add_rows(text: str, torch: NewTorch | None, release: NewRelease | None) -> str:
    """versions.toml with the new rows, each value with where it was read."""
    if release is not None:
        block = (
            f'\n[[triton.releases]]\nngc = "{release.ngc}"\nserver = "{release.server}"\nserves_torch_aoti = true\n'
            f'[triton.releases.sources]\nserver = "GH {release.page}: Release {release.server} corresponding to NGC '
            f'container {release.ngc} (found by tritonpt_ci.watch)"\n'
        )
        text = _insert_after_last(text, "[[triton.releases]]", block)
    if torch is not None:
        block = (
            f'\n[[compat.torch]]\nminor = "{torch.minor}"\ntorch = "{torch.torch}"\n'
            f'torchvision = "{torch.torchvision}"\nline = "{torch.line}"\n'
        )
        text = _insert_after_last(text, "[[compat.torch]]", block)
    return text


def _run(args: Sequence[str], log: Path) -> int:
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as handle:
        return subprocess.run(
            [sys.executable, *args], cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT, check=False
        ).returncode


def _pages(reports: Path) -> None:
    """The generated pages, from versions.toml as it is now (a child process: this one read the old file)."""
    script = (
        "from pathlib import Path; from tritonpt.versions import VERSIONS, markdown_table; "
        f"p = Path({str(VERSIONS_PAGE)!r}); s = p.read_text(); a, b = '<!-- versions:start -->\\n', "
        "'<!-- versions:end -->'; p.write_text(s[: s.index(a) + len(a)] + markdown_table(VERSIONS) + s[s.index(b):])"
    )
    _run(["-c", script], reports / "pages.log")
    _run(["-m", "tritonpt.doctor.compat"], reports / "pages.log")


def body(torch: NewTorch | None, release: NewRelease | None, measured: compat.Table | None, said: str) -> str:
    """The pull request's text: what is new, and every verdict of the legs that ran for it."""
    lines = ["# The compatibility table, kept up by tritonpt_ci.watch", ""]
    if release is not None:
        lines += [
            f"- **Triton {release.ngc}** (server {release.server}): a new row of versions.toml, from {release.page}. "
            "Its backend's libtorch is not stated there: the row says so until a source does.",
        ]
    if torch is not None:
        lines += [
            f"- **torch {torch.torch}** (torchvision {torch.torchvision}): a new [compat] row, served on pytorch_backend "
            f"{torch.line} (the newest pinned line, standing in for any release that bundles it).",
            f"- Its operator registry, read from it: {registry.PAGE} in the patch shows what it added and removed; "
            f"the compact file is {registry.REGISTRIES.name} beside the patch (binary), for src/tritonpt/doctor/.",
        ]
    if measured is not None and torch is not None:
        pairs = [p for p in measured.pairs if torch.minor in (p.exported_minor, p.served_minor)]
        lines += ["", "## Verdicts, each from its run", ""]
        lines += [f"- {p.verdict}: {p.describe()}" for p in pairs] or ["- no leg reported a pair"]
    if said:
        lines += ["", "## What could not be measured", "", "```", said, "```"]
    return "\n".join(lines) + "\n"


def run(lookups: Lookups, reports: Path) -> int:
    reports.mkdir(parents=True, exist_ok=True)
    torch, release = new_torch(lookups), new_release(lookups)
    found = {"torch": torch.torch if torch else None, "release": release.ngc if release else None}
    (reports / "found.json").write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")
    if torch is None and release is None:
        _say(
            f"nothing new: torch {VERSIONS.newest_compat.torch} and Triton {VERSIONS.triton_releases[-1].ngc} lead"
        )
        return 0
    before = {path: path.read_text(encoding="utf-8") for path in CHANGED}
    registries = registry.REGISTRIES.read_bytes() if registry.REGISTRIES.is_file() else b""

    TOML.write_text(add_rows(TOML.read_text(encoding="utf-8"), torch, release), encoding="utf-8")
    if torch is not None:
        PYPROJECT.write_text(admit(PYPROJECT.read_text(encoding="utf-8"), torch), encoding="utf-8")
    said = ""
    if torch is not None:
        _say(f"torch {torch.torch} is new: its compat legs")
        code = _run(
            [
                "-m",
                "tritonpt_ci.compat",
                "--minor",
                torch.minor,
                "--write",
                "--reports",
                str(reports / "compat"),
            ],
            reports / "compat.log",
        )
        if code != 0:  # a verdict of the pull request, not a red schedule
            tail = (reports / "compat.log").read_text(encoding="utf-8", errors="replace").splitlines()[-20:]
            said = f"`python -m tritonpt_ci.compat --minor {torch.minor}` exited {code}:\n" + "\n".join(tail)
    _pages(reports)
    measured = reports / "compat" / "compat.json"  # this run's own table: none where its legs did not end
    table = compat.load(measured) if torch is not None and measured.is_file() else None
    (reports / "pull-request.md").write_text(body(torch, release, table, said), encoding="utf-8")
    (reports / "changes.patch").write_text(_patch(before), encoding="utf-8")
    if (
        registry.REGISTRIES.is_file() and registry.REGISTRIES.read_bytes() != registries
    ):  # binary: not in a patch
        shutil.copyfile(registry.REGISTRIES, reports / registry.REGISTRIES.name)
        _say(f"the new torch's registry: {reports / registry.REGISTRIES.name}, for src/tritonpt/doctor/")
    _say(f"written: {reports / 'pull-request.md'}, {reports / 'changes.patch'}")
    return 0


def _patch(before: Mapping[Path, str]) -> str:
    """What the run changed, as a patch `git apply` takes (a/ and b/ paths from the checkout's root)."""
    parts: list[str] = []
    for path, old in before.items():
        name = path.relative_to(ROOT).as_posix()
        new = path.read_text(encoding="utf-8")
        parts += difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{name}", f"b/{name}"
        )
    return "".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tritonpt_ci.watch", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--lookups", type=Path, help="answer the lookups from this JSON file ({url: document})"
    )
    add_arguments(parser.add_argument, ("reports",), defaults={"reports": "reports/watch"})
    args = parser.parse_args(argv)
    recorded = json.loads(args.lookups.read_text(encoding="utf-8")) if args.lookups else None
    try:
        return run(Lookups(recorded), args.reports)
    except LookupFailedError as exc:
        _say(f"error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
