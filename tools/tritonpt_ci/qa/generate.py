"""The models Triton's QA tests load, made by upstream's own generators and cached by what makes them.

    key      the suite's commit, its generators and their arguments, the substitutions applied to generator
             files, the versions of Python, torch, torchvision and numpy that run them, the C++ compiler and the
             CPU's feature flags (AOTInductor compiles for this CPU)
    cache    <cache>/qa-models/<ref>-<key>/   (one folder per generator output, plus generated.json)
             staged beside the cache and moved in with one rename: never half-made
Generation runs from the suite's adapted ``qa/common`` with no GPU visible, so the generators write CPU configs.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path

from tritonpt import caches, scratch, stopping
from tritonpt.backend import Step, cache_root
from tritonpt.errors import HINT, QaError
from tritonpt_ci.qa.adapt import GENERATION, SUBSTITUTIONS
from tritonpt_ci.qa.plan import Plan, overlay_digest

RECORD = "generated.json"
TAIL = 15


def _cpu_flags() -> str:
    """A digest of this CPU's feature flags: AOTInductor compiles the torch_aoti models for the host's CPU
    (``-march=native``), so a cache made on another CPU may not run here."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("flags"):
                return hashlib.sha256(" ".join(sorted(line.split(":", 1)[1].split())).encode()).hexdigest()[
                    :12
                ]
    except OSError:
        pass
    return platform.processor() or "unknown"


def _compiler() -> str:
    try:
        done = subprocess.run(["c++", "--version"], capture_output=True, text=True, check=False)
    except OSError:
        return "none"
    return done.stdout.splitlines()[0] if done.stdout else "none"


def _versions() -> dict[str, str]:
    found = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu_flags": _cpu_flags(),
        "compiler": _compiler(),
    }
    for name in ("torch", "torchvision", "numpy"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


def inputs(plan: Plan) -> dict[str, object]:
    """Everything the generated models depend on."""
    ref = plan.suite.source.ref
    return {
        "commit": plan.suite.source.commit,
        "generators": [[g.script, *g.args, g.into] for g in plan.generators],
        **({"overlay": overlay_digest(plan)} if plan.overlay else {}),
        "substitutions": [
            [s.key, s.old, s.new] for s in SUBSTITUTIONS if s.ref == ref and GENERATION in s.tests
        ],
        **_versions(),
    }


def key(plan: Plan) -> str:
    text = json.dumps(inputs(plan), sort_keys=True)
    return f"{plan.suite.source.ref}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def models(plan: Plan, common: Path, *, log: Path, cache: Path | None = None, step: Step) -> Path:
    """The folder of generated models for ``plan`` (``common``: the adapted qa/common), made once; the
    generators' output goes to ``log``."""
    root = (cache or cache_root()) / "qa-models"
    folder = root / key(plan)
    if (folder / RECORD).is_file():
        step(f"{plan.suite.source.ref}: models from the cache ({folder})")
        caches.note("qa-models", plan.suite.source.ref, hit=True, say=step)
        return folder
    started_all = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    with scratch.folder(f".{folder.name}-", inside=root) as staging:
        made = staging / "made"
        made.mkdir()
        timings = {}
        for generator in plan.generators:
            label = " ".join([generator.script, *generator.args])
            whose = "ours, docs/upstream/qa/common" if generator.ours else "upstream's generator"
            step(f"{plan.suite.source.ref}: generating models with {label} ({whose})")
            started = time.monotonic()
            _generate(common, generator.script, generator.args, made / generator.into, log)
            timings[label] = round(time.monotonic() - started, 1)
        record = {"inputs": inputs(plan), "seconds": timings}
        (made / RECORD).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        with stopping.ctrl_c_held():
            if not (folder / RECORD).is_file():  # another run may have made it meanwhile
                made.replace(folder)
    caches.note(
        "qa-models", plan.suite.source.ref, hit=False, seconds=time.monotonic() - started_all, say=step
    )
    return folder


def _generate(common: Path, script: str, args: tuple[str, ...], into: Path, log: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TRITON_GENSRCDIR": str(common)}
    command = [sys.executable, script, *args, f"--models_dir={into}"]
    with log.open("a", encoding="utf-8") as out:
        done = subprocess.run(command, cwd=common, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    if done.returncode != 0:
        tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-TAIL:])
        msg = (
            f"Cannot generate Triton's QA models: `{' '.join(command[1:])}` in {common} exited with "
            f"{done.returncode}. The last lines of {log}:\n{tail}\n{HINT} the generators need torch, "
            "torchvision, setuptools and a C++ compiler (AOTInductor compiles the torch_aoti models)."
        )
        raise QaError(msg)
