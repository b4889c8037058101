"""The house: every import points down the pipeline, nothing runtime imports the test helpers, and the front
doors load neither torch nor docker-py until a task needs them."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import tritonpt

PACKAGE = Path(tritonpt.__file__).resolve().parent
ROOT = PACKAGE.parents[1]
TOOLS = ROOT / "tools" / "tritonpt_ci"
"""This repository's own CI programs: beside the package, never in it."""

# Bottom first: a stage may import only the stages before it (and, inside a subpackage, its own modules).
LAYERS = (
    "errors",
    "caches",
    "stopping",
    "scratch",
    "fetch",
    "versions",
    "pages",
    "options",
    "dtypes",
    "jit",
    "operators",
    "backend",
    "spec",
    "builtin",
    "repository",
    "shards",
    "parity",
    "reference",
    "validate",
    "selection",
    "in_process",
    "export",
    "image",
    "client",
    "perf_analyzer",
    "server",
    "assertions",
    "reporting",
    "matrix",
    "bench",
    "tune",
    "migrate",
    "doctor",
    "console",
    "cli",
    "tasks",
    "taskpage",
    "__main__",
)


def _stage(module: str) -> str:
    """``tritonpt.server.local`` -> ``server``; ``tritonpt`` itself -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_of(path: Path) -> str:
    relative = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every tritonpt module a file imports, at module level or inside functions."""
    found: set[str] = set()
    package = _module_of(path) if path.name == "__init__.py" else _module_of(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if _ours(alias.name)}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    [*package.split(".")[: len(package.split(".")) - node.level + 1], base]
                ).strip(".")
            if base == "tritonpt":
                found |= {f"tritonpt.{alias.name}" for alias in node.names if alias.name != "__version__"}
            elif base.startswith("tritonpt."):
                found.add(base)
    return found


def _ours(name: str) -> bool:
    """``tritonpt`` and its modules (not ``tritonpt_ci``, the tools beside it)."""
    return name == "tritonpt" or name.startswith("tritonpt.")


def _graph() -> dict[str, set[str]]:
    return {_module_of(path): _imports(path) for path in sorted(PACKAGE.rglob("*.py"))}


def test_every_stage_is_in_the_layer_list() -> None:
    stages = {_stage(module) for module in _graph()} - {"__init__"}
    assert stages <= set(LAYERS), stages - set(LAYERS)


def test_imports_point_only_down_the_pipeline() -> None:
    upward = []
    for module, imported in _graph().items():
        here = _stage(module)
        for target in imported:
            there = _stage(target)
            if here in ("__init__", there):
                continue
            if LAYERS.index(there) > LAYERS.index(here):
                upward.append(f"{module} imports {target} ({there} comes after {here})")
    assert not upward, "\n".join(upward)


def test_no_module_imports_another_modules_private_names() -> None:
    """A leading underscore means "this module's own": ``from tritonpt.x import _name`` reaches into another
    room (ruff's SLF rules hold attribute access, ``obj._name``, the same way)."""
    crossings = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (
                node.level or (node.module or "").startswith("tritonpt")
            ):
                private = [
                    a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")
                ]
                if private:
                    where = f"{path.relative_to(PACKAGE.parent)}:{node.lineno}"
                    crossings.append(f"{where} imports {', '.join(private)} from {node.module or '.'}")
    assert not crossings, "\n".join(crossings)


def test_no_module_imports_itself_in_a_cycle() -> None:
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the path, 2: done
    cycles: list[str] = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for target in sorted(graph.get(module, ())):
            if target not in graph:
                continue
            if state.get(target) == 1:
                cycles.append(" -> ".join([*path[path.index(target) :], target]))
            elif target not in state:
                visit(target, [*path, target])
        state[module] = 2

    for module in graph:
        if module not in state:
            visit(module, [module])
    # A package's __init__ re-exporting its own submodules is not a cycle of stages.
    real = [c for c in cycles if len({_stage(m) for m in c.split(" -> ")}) > 1]
    assert not real, "\n".join(real)


def test_errors_import_nothing_of_the_package() -> None:
    assert _imports(PACKAGE / "errors.py") == set()


def test_nothing_users_run_imports_the_repositorys_tools() -> None:
    """tools/tritonpt_ci (the stand-ins, the QA, soak and fault tiers' programs) may import the package; the
    package, which is what users install, never imports them."""
    offenders = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "tritonpt_ci" for a in node.names))
        or (isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "tritonpt_ci")
    ]
    assert not offenders, "\n".join(offenders)


def _loaded_after(code: str) -> set[str]:
    script = f"{code}\nimport sys\nprint(' '.join(sorted(m.split('.')[0] for m in sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=ROOT, timeout=120
    )
    return set(done.stdout.split())


def test_the_front_doors_load_neither_torch_nor_docker() -> None:
    loaded = _loaded_after("import tritonpt.cli, tritonpt.console, tritonpt.tasks, tritonpt.__main__")
    assert "torch" not in loaded
    assert "docker" not in loaded


def test_invoke_list_loads_no_torch() -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "invoke", "--list"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        timeout=120,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert "export" in done.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if "|" in line}
    assert "torch" not in imported
    assert not any(name.startswith("torch.") for name in imported)


def test_the_backend_stage_copies_every_module_the_backend_build_imports() -> None:
    """docker/pytorch.Dockerfile's backend stage runs ``python -m tritonpt.backend`` from a copy of the
    modules image.BACKEND_MODULES names (with the backend package): whatever it imports must be among them."""
    from tritonpt import image  # noqa: PLC0415

    graph = _graph()
    needed: set[str] = set()
    todo = [m for m in graph if _stage(m) == image.BACKEND_PACKAGE]
    while todo:
        module = todo.pop()
        for target in graph.get(module, set()) - needed:
            needed.add(target)
            todo.append(target)
    copied = {f"tritonpt.{Path(name).stem}" for name in image.BACKEND_MODULES if name.endswith(".py")}
    outside = {m for m in needed if _stage(m) != image.BACKEND_PACKAGE and m != "tritonpt"}
    assert outside <= copied, sorted(outside - copied)


def test_the_recipes_live_in_docker_at_the_top_and_nowhere_else() -> None:
    """The design card's layout: docker/ beside noxfile.py and tasks.py holds the recipes; the wheel maps it into
    the package (pyproject.toml), so there is no second copy in the source tree."""
    from tritonpt import image  # noqa: PLC0415

    assert image.RECIPES_DIR == ROOT / "docker"
    for recipe in image.RECIPES:
        assert image.recipe_path(recipe) == ROOT / "docker" / f"{recipe}.Dockerfile"
    copies = [p for p in PACKAGE.rglob("*.Dockerfile") if p.stem in image.RECIPES]
    assert copies == []
    assert '"docker" = "tritonpt/recipes"' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


MODULE_LINES = 600
"""No module of the package is longer: a longer one is cut along its seams into a subpackage."""
RULE_BOOK_LINES, RULE_LINES = 400, 80
"""The validator's rooms: no family's module over 400 lines of checks, no function over 80. The rule
declarations (``NAME = rule(...)``) count one line each, as they did before they carried the rules'
documentation (why, example: docs/reference/validator.md is written from them)."""


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _lines_of_checks(path: Path) -> int:
    """A family's lines, each rule declaration counted as one."""
    documentation = sum(
        node.end_lineno - node.lineno
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and node.value.func.id == "rule"
        and node.end_lineno
    )
    return _lines(path) - documentation


def test_no_module_is_longer_than_its_rooms_allow() -> None:
    long = {
        str(path.relative_to(ROOT)): _lines(path)
        for path in [*PACKAGE.rglob("*.py"), *TOOLS.rglob("*.py")]
        if _lines(path) > MODULE_LINES
    }
    assert not long, long


def test_the_rule_book_has_small_rooms() -> None:
    book = PACKAGE / "validate"
    long = {p.name: _lines_of_checks(p) for p in book.glob("*.py") if _lines_of_checks(p) > RULE_BOOK_LINES}
    assert not long, long
    functions = {
        f"{path.name}:{node.name}": node.end_lineno - node.lineno + 1
        for path in book.glob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef)
        and node.end_lineno
        and node.end_lineno - node.lineno + 1 > RULE_LINES
    }
    assert not functions, functions


def test_invoke_in_a_checkout_offers_every_task_the_package_has() -> None:
    """The root tasks.py hands invoke tritonpt.tasks' namespace: `invoke TASK` and `tritonpt TASK` are one set,
    written once (tritonpt.tasks.PIPELINE)."""
    from invoke.loader import FilesystemLoader  # noqa: PLC0415

    from tritonpt import tasks  # noqa: PLC0415

    module, _ = FilesystemLoader(start=str(ROOT)).load("tasks")
    assert module.namespace is tasks.namespace
    assert sorted(tasks.namespace.task_names) == sorted(t.name.replace("_", "-") for t in tasks.TASKS)
    assert [t.body.__wrapped__ for t in tasks.TASKS] == list(tasks.PIPELINE)


DOCSTRING_LINES = 10
"""A module's docstring says what its room holds in at most this many lines (its opening and closing quotes
counted); history goes to the commit log, guides to docs/."""


def test_every_module_says_what_its_room_holds_in_a_few_lines() -> None:
    long = {}
    for path in [*PACKAGE.rglob("*.py"), *TOOLS.rglob("*.py")]:
        body = ast.parse(path.read_text(encoding="utf-8")).body
        first = body[0] if body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and first.end_lineno:
            lines = first.end_lineno - first.lineno + 1
            if lines > DOCSTRING_LINES:
                long[str(path.relative_to(ROOT))] = lines
    assert not long, long
