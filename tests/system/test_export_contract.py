"""The user-model contract of `invoke export --model MODULE:ATTR`, through the front door: every way a model
breaks it ends in one paragraph (no traceback), exit code 1, and the repository exactly as it was.

Each case runs `python -m invoke export` in a process of its own (torch imported before it starts: preloaded.py;
the control case and the structured outputs start `python -m invoke` itself) against a repository that already
holds a model exported under the same name (a failed re-export must keep it), and a few run against a repository
folder that does not exist yet (a failed export must not create it). A tree listing with a sha256 of every file is
taken before and after. The cases and what they showed go to the reliability report's ``export-contract``
part when this module ends.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import os
import re
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tritonpt import export
from tritonpt.reporting.reliability import count_tracebacks, write_part

from ..helpers import ROOT, invoke_command
from . import contract_models, preloaded

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
NAME = "contract"
ERROR_LINE = re.compile(r"^error:", re.MULTILINE)
PARAGRAPH_LIMIT = 1200  # characters: a paragraph, not a page of torch internals

_results: list[dict[str, Any]] = []
_outputs: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def _contract_part() -> Iterator[None]:
    """The reliability report's ``export-contract`` part: each case and what it showed, once all have run."""
    yield
    write_part(
        "export-contract",
        {"cases": list(_results), "tracebacks": count_tracebacks(_outputs)},
        folder=ROOT / "reports" / "reliability" / "parts",
    )


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository holding a sound model exported as ``contract``: every failed re-export must keep it."""
    repository = tmp_path_factory.mktemp("previous") / "repository"
    export.export_factory(contract_models.good, name=NAME, repository=repository)
    return repository


# Modules that break before a factory is ever called; written into the folder export runs from.
IMPORT_FAILURES = {
    "syntax_error": "import torch\n\ndef build(:\n    return None\n",
    "raises_on_import": "import torch\n\nraise RuntimeError('CUDA_HOME is not set')\n",
    "imports_missing": "import torch\nimport tritonpt_no_such_package\n\ndef build():\n    return None\n",
}


def _tree(root: Path) -> dict[str, str] | None:
    """Every path under ``root`` with a sha256 of each file (None when ``root`` does not exist)."""
    if not root.exists():
        return None
    return {
        str(path.relative_to(root)): "folder"
        if path.is_dir()
        else hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
    }


def _error_paragraph(stderr: str) -> str:
    """From the line the front door starts with ``error:`` to the end (the progress lines before it are not the error)."""
    match = ERROR_LINE.search(stderr)
    return stderr[match.start() :].strip() if match else ""


def _is_one_paragraph(stderr: str) -> bool:
    paragraph = _error_paragraph(stderr)
    return (
        bool(paragraph)
        and len(ERROR_LINE.findall(stderr)) == 1
        and "\n\n" not in paragraph
        and "\n" + " " * 4 + "^" not in paragraph  # no source excerpt with a caret under it
        and len(paragraph) <= PARAGRAPH_LIMIT
    )


def _run(case: str, model: str, repository: Path, cwd: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """`python -m invoke export --model MODEL` in a process of its own, started with torch imported
    (tests/system/preloaded.py); records the case for the reliability report."""
    for module, source in IMPORT_FAILURES.items():
        (cwd / f"{module}.py").write_text(textwrap.dedent(source), encoding="utf-8")
    env = {
        k: v for k, v in os.environ.items() if k != "TRITONPT_DEBUG"
    }  # --debug prints tracebacks on purpose
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH", "")]))
    # The outermost folder that does not exist yet (a failed export must not create it), else the repository.
    watched = next((p for p in reversed([repository, *repository.parents]) if not p.exists()), repository)
    before = _tree(watched)
    command = invoke_command(
        "export", "--model", model, "--name", NAME, "--repository", str(repository), *extra
    )
    done = preloaded.run_command(command, cwd=cwd, env=env, timeout=300)
    _outputs.append(done.stdout + done.stderr)
    _results.append(
        {
            "case": case,
            "exit": done.returncode,
            "one_paragraph": _is_one_paragraph(done.stderr),
            "repository_unchanged": _tree(watched) == before,
        }
    )
    return done


# (case, MODULE:ATTR, extra options, words the error must hold)
CASES = [
    ("factory-raises", "contract_models:raises", [], "the factory raised FileNotFoundError: the checkpoint"),
    ("factory-takes-arguments", "contract_models:needs_arguments", [], "the factory raised TypeError"),
    ("returns-none", "contract_models:returns_none", [], "the factory returned NoneType"),
    ("returns-module-only", "contract_models:returns_module_only", [], "the factory returned Linear"),
    ("returns-three-items", "contract_models:returns_three_items", [], "the factory returned tuple"),
    ("returns-a-function", "contract_models:returns_function_and_inputs", [], "the factory returned tuple"),
    ("inputs-not-tensors", "contract_models:inputs_are_lists", [], "returned list as example inputs"),
    ("inputs-numpy", "contract_models:inputs_are_numpy", [], "returned tuple as example inputs"),
    ("spec-inputs-not-tensors", "contract_models:spec_with_string_inputs", [], "example_inputs is ['str']"),
    ("inputs-meta-device", "contract_models:inputs_on_meta_device", [], "input 0: the example tensor is on device meta"),
    ("module-meta-device", "contract_models:module_on_meta_device", [], "parameter 'layer.weight' is on device meta"),
    ("inputs-complex64", "contract_models:inputs_complex64", [], "cannot serve tensors of torch.complex64"),
    ("inputs-bfloat16", "contract_models:inputs_bfloat16", [], "cannot serve tensors of torch.bfloat16"),
    ("inputs-empty-axis", "contract_models:inputs_empty_axis", [], "with length 0 on axis 1"),
    ("inputs-one-value-a-sample", "contract_models:inputs_one_value_a_sample", [], "is one value a sample"),
    ("inputs-wrong-shape", "contract_models:inputs_of_the_wrong_shape", [], "forward() failed on inputs [2, 5]"),
    ("outputs-float", "contract_models:outputs_float", [], "forward() returned float"),
    ("outputs-keys-by-input", "contract_models:outputs_keys_by_input", [], "what forward() returns changes with its inputs"),
    ("outputs-meta-device", "contract_models:outputs_on_meta_device", [], "output 0 is a strided tensor on device meta"),
    ("outputs-complex64", "contract_models:outputs_complex64", [], "output 0: Triton's pytorch backend cannot serve"),
    ("untraceable", "contract_models:untraceable", [], "The tracer warned: Converting a tensor to a NumPy array"),
    ("unscriptable", "contract_models:unscriptable", ["--script"], "torch.jit.script failed: NotSupportedError"),
    ("trace-freezes-a-branch", "contract_models:traced_branch", [], "the reloaded TorchScript disagrees with eager"),
    ("dropout-in-train-mode", "contract_models:dropout_in_train_mode", [], "forward() is not deterministic"),
    ("random-in-forward", "contract_models:random_in_forward", [], "forward() is not deterministic"),
    ("state-between-calls", "contract_models:state_between_calls", [], "forward() is not deterministic"),
    ("module-syntax-error", "syntax_error:build", [], "importing 'syntax_error' raised SyntaxError"),
    ("module-raises-on-import", "raises_on_import:build", [], "raised RuntimeError: CUDA_HOME is not set"),
    ("module-imports-missing", "imports_missing:build", [], "it imports 'tritonpt_no_such_package'"),
]  # fmt: skip


# One failure before anything is written, one inside the staged folder, one at import: none creates a folder.
FRESH = ["factory-raises", "trace-freezes-a-branch", "dropout-in-train-mode", "module-syntax-error"]
SIDE_BY_SIDE = 3
"""Cases run at once: each is a process of its own in folders of its own."""


@dataclass(frozen=True, kw_only=True)
class Ran:
    done: subprocess.CompletedProcess[str]
    folder: Path  # the case's own: its repository, and what it runs from
    repository: Path


@pytest.fixture(scope="module")
def ran(previous: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Ran]:
    """Every case's `invoke export`, run side by side: ``(case, "keeps")`` over a copy of ``previous``,
    ``(case, "fresh")`` into a repository folder that does not exist yet."""

    def one(case: str, model: str, extra: list[str], where: str, folder: Path) -> Ran:
        if where == "keeps":
            repository = folder / "repository"
            shutil.copytree(previous, repository)
            done = _run(case, model, repository, folder, *extra)
        else:
            repository = folder / "new" / "repository"
            done = _run(f"{case} (no repository yet)", model, repository, folder, *extra)
        return Ran(done=done, folder=folder, repository=repository)

    wanted = [(c, "keeps") for c in CASES] + [(c, "fresh") for c in CASES if c[0] in FRESH]
    with concurrent.futures.ThreadPoolExecutor(SIDE_BY_SIDE) as pool:
        running = {
            (c[0], where): pool.submit(
                one, c[0], c[1], c[2], where, tmp_path_factory.mktemp(f"{c[0]}-{where}")
            )
            for c, where in wanted
        }
    return {key: future.result() for key, future in running.items()}


@pytest.mark.parametrize(("case", "words"), [pytest.param(c[0], c[3], id=c[0]) for c in CASES])
def test_broken_model_keeps_the_previous_export(
    ran: dict[tuple[str, str], Ran], previous: Path, case: str, words: str
) -> None:
    it = ran[case, "keeps"]
    done = it.done
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert words in _error_paragraph(done.stderr), done.stderr
    assert _is_one_paragraph(done.stderr), done.stderr
    assert _tree(it.repository) == _tree(previous), "the failed export changed the repository"


@pytest.mark.parametrize(
    ("case", "words"), [pytest.param(c[0], c[3], id=c[0]) for c in CASES if c[0] in FRESH]
)
def test_broken_model_creates_no_repository(ran: dict[tuple[str, str], Ran], case: str, words: str) -> None:
    it = ran[case, "fresh"]
    done = it.done
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert words in _error_paragraph(done.stderr), done.stderr
    new = it.folder / "new"
    assert not new.exists(), sorted(str(p) for p in new.rglob("*"))


def test_the_sound_model_replaces_the_previous_export(previous: Path, tmp_path: Path) -> None:
    """The control: the same harness sees an export that succeeds, and the repository it changes."""
    repository = tmp_path / "repository"
    shutil.copytree(previous, repository)
    before = _tree(repository)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
    }
    command = invoke_command("export", "--model", "contract_models:good", "--name", NAME)
    done = subprocess.run(
        [*command, "--repository", str(repository), "--seed", "1"],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    after = _tree(repository)
    assert after is not None
    assert before is not None
    assert after != before  # another seed: other weights and reference data
    assert sorted(after) == sorted(before)  # the same files: one model, no staging folder left


@pytest.mark.parametrize(
    ("model", "names"),
    [
        ("contract_models:outputs_dict", "logits__0"),
        ("contract_models:outputs_nested", "OUTPUT__0, OUTPUT__1, OUTPUT__2"),
    ],
    ids=["dict", "nested-tuple"],
)
def test_outputs_in_a_structure_are_served_and_the_front_door_says_how(
    tmp_path: Path, model: str, names: str
) -> None:
    """What export once refused (a dict, a tuple inside a tuple) is now served as a flat tuple, said in one line."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
    }
    command = invoke_command("export", "--model", model, "--name", NAME)
    done = subprocess.run(
        [*command, "--repository", str(tmp_path / "repository")],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "served as a tuple of" in done.stderr, done.stderr
    assert names in done.stderr, done.stderr
    assert "Traceback" not in done.stdout + done.stderr
