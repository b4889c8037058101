"""The front doors' options: each declared once (tritonpt.options.OPTIONS), read the same in every task and in
the matrix's pytest options, and a value outside an option's choices refused in one paragraph."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tritonpt import taskpage
from tritonpt.errors import TritonPtError
from tritonpt.export.builtin_set import export_builtin_set
from tritonpt.matrix import settings
from tritonpt.options import OPTIONS

ROOT = Path(__file__).resolve().parents[2]


def test_an_option_reads_the_same_in_every_task_that_offers_it() -> None:
    helps: dict[str, set[str]] = defaultdict(set)
    for task in taskpage.TASKS:
        for argument in task.get_arguments():
            assert argument.name in OPTIONS, f"{task.name}: --{argument.name} is not declared in OPTIONS"
            helps[argument.name].add(str(argument.help))
    differing = {name: sorted(said) for name, said in helps.items() if len(said) > 1}
    assert not differing, differing
    offered = defaultdict(int)
    for task in taskpage.TASKS:
        for argument in task.get_arguments():
            offered[argument.name] += 1
    assert all(offered[n] > 1 for n in ("repository", "pt2_build", "shard", "image", "mount", "debug")), (
        offered
    )


def test_no_task_has_a_short_flag_and_each_flag_is_the_options_own() -> None:
    for task in taskpage.TASKS:
        for argument in task.get_arguments():
            flag = OPTIONS[argument.name].flag.removeprefix("--")
            assert argument.names == (flag,), f"{task.name}: {argument.names}"  # no made-up letters


def test_the_matrix_reads_its_options_from_the_registry_and_checks_them_once() -> None:
    """The matrix's command line is the registry's options (help included); a value outside an option's choices,
    a bad shard or a bad mount is refused when the settings are built, before anything starts."""
    declared = {action.option_strings[0]: action.help for action in settings.parser()._actions[1:]}
    for name in settings.NAMES:
        assert declared[OPTIONS[name].flag] == OPTIONS[name].help
    given, rest = settings.parse(
        ["--target", "local", "-k", "parity", "--no-rerun", "-x", "--pt2-build=patched"]
    )
    assert (given.target, given.rerun, given.pt2_build, given.strict_backend) == (
        "local",
        False,
        "patched",
        True,
    )
    assert rest == ["-k", "parity", "-x"]
    assert given.line == ("--target", "local", "--pt2-build", "patched", "--no-rerun")
    for bad, said in (
        (["--shard", "3/2"], "Cannot use --shard '3/2'"),
        (["--mount", "nowhere"], "--mount"),
        (["--shard-costs", "x.json"], "--shard-costs balances shards"),
    ):
        with pytest.raises(TritonPtError, match=said):
            settings.parse(bad)


def test_the_tasks_page_is_what_the_declarations_make() -> None:
    assert taskpage.PAGE.read_text(encoding="utf-8") == taskpage.render(), (
        f"{taskpage.PAGE} is stale: run `python -m tritonpt.taskpage`"
    )


def test_a_value_outside_an_options_choices_is_one_paragraph_and_exit_1(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tritonpt", "export", "--format", "onnx"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert "--format 'onnx': expected one of torchscript, pt2, both." in said
    assert "Traceback" not in said
    assert not (tmp_path / "model_repository").exists()  # nothing half-written


def _run(*command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *command], capture_output=True, text=True, check=False, cwd=cwd, timeout=120
    )


def test_merge_has_one_door_and_says_no_folders_the_same_way_in_each(tmp_path: Path) -> None:
    """`nox -s merge-reports` runs `python -m tritonpt.reporting.merge`; `tritonpt merge-reports` calls the same function:
    with no shard folders, both exit 1 with the same paragraph, and nothing is written."""
    module = _run("-m", "tritonpt.reporting.merge", cwd=tmp_path)
    task = _run("-m", "tritonpt", "merge-reports", cwd=tmp_path)
    for done in (module, task):
        assert done.returncode == 1, done.stderr
        assert "error: Cannot merge: no report folders match reports/shard-*-of-*." in done.stderr
        assert "Traceback" not in done.stderr
    assert module.stderr.strip() == task.stderr.strip()
    assert not (tmp_path / "reports").exists()


def test_a_shards_reports_go_to_its_own_folder_unless_reports_says_where() -> None:
    assert settings.parse(["--shard", "2/3"])[0].reports == Path("reports/shard-2-of-3")
    assert settings.parse(["--shard=2/3", "--reports", "x"])[0].reports == Path("x")
    assert settings.parse(["-k", "parity"])[0].reports == Path("reports")


def test_export_builtin_leaves_a_users_repository_as_it_is(tmp_path: Path) -> None:
    """The built-in set goes into model_repository/ only: a folder of the user's is checked as it is (here it is
    empty, so the matrix stops at validation; what matters is that nothing was exported into it)."""
    said: list[str] = []
    mine = tmp_path / "mine"
    mine.mkdir()
    export_builtin_set(mine, pt2_build="stock", step=said.append)
    assert said == [f"--export-builtin: {mine} is not model_repository/, so it is checked as it is"]
    assert list(mine.iterdir()) == []


def test_a_tasks_literal_parameter_is_exactly_its_options_choices() -> None:
    """The door refuses a value outside an option's choices before the task runs, so a task takes the value as
    the Literal its parameter names, without checking it again: the two lists must be one."""
    import typing  # noqa: PLC0415

    from tritonpt import tasks  # noqa: PLC0415

    for work in tasks.PIPELINE:
        for name, hint in typing.get_type_hints(work).items():
            literals = [
                a for a in (typing.get_args(hint) or (hint,)) if typing.get_origin(a) is typing.Literal
            ]
            literals += [hint] if typing.get_origin(hint) is typing.Literal else []
            for literal in literals:
                assert OPTIONS[name].choices == typing.get_args(literal), f"{work.__name__}: --{name}"


def _declared_flags(path: Path) -> list[tuple[int, str]]:
    """The flags a file declares by hand: the literal first argument of an ``add_argument`` or ``addoption``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("add_argument", "addoption")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return found


def test_no_program_declares_a_registered_option_a_second_time() -> None:
    """Every program, the CI's and the tests' included, takes a registered option (tritonpt.options.OPTIONS) from
    the registry (add_arguments, with a default of its own where it needs one), never by hand."""
    registered = {option.flag for option in OPTIONS.values()}
    registered |= {"--no-" + o.flag.removeprefix("--") for o in OPTIONS.values() if o.default is True}
    # the same flag with a meaning of its own, which its users have typed for long: a model of the repository by
    # name (bench), an architecture of the zoo, the seed of the soak's draws
    own = {("bench/__main__.py", "--model"), ("zoo/__main__.py", "--only"), ("soak/__main__.py", "--seed")}
    files = [
        *(ROOT / "src").rglob("*.py"),
        *(ROOT / "tools").rglob("*.py"),
        *(ROOT / "tests").rglob("*.py"),
        ROOT / "noxfile.py",
        ROOT / "tasks.py",
    ]
    again = [
        f"{path.relative_to(ROOT)}:{line}: {flag}"
        for path in files
        if path.name != "test_doors.py"
        for line, flag in _declared_flags(path)
        if flag in registered and (f"{path.parent.name}/{path.name}", flag) not in own
    ]
    assert not again, "declared again by hand (use tritonpt.options.add_arguments):\n" + "\n".join(again)


def test_check_and_the_matrix_command_build_the_same_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """`tritonpt check` takes every option of the matrix as its own flag and hands the matrix what
    `python -m tritonpt.matrix` builds from the same options (--no-strict-backend, --sanitize, --mount twice);
    --pytest is pytest's alone."""
    from tritonpt import cli  # noqa: PLC0415
    from tritonpt.matrix import run  # noqa: PLC0415

    assert set(settings.NAMES) <= set(inspect.signature(cli.check).parameters)
    handed: list[tuple[settings.Settings, list[str]]] = []
    monkeypatch.setattr(run, "run", lambda given, rest: handed.append((given, list(rest))) or 0)
    values = {name: OPTIONS[name].default for name in inspect.signature(cli.check).parameters}
    values |= {"target": "url", "url": "http://127.0.0.1:8000", "shard": "1/2"}
    values |= {"mount": [f"{ROOT}:/a", f"{ROOT}:/b"], "strict_backend": False, "sanitize": "address"}
    values["pytest"] = "-k parity -x"
    with pytest.raises(SystemExit) as ended:
        cli.check(**values)
    assert ended.value.code == 0
    [(given, rest)] = handed
    expected, _ = settings.parse(
        [
            "--target", "url", "--url", "http://127.0.0.1:8000", "--shard", "1/2", "--mount", f"{ROOT}:/a",
            "--no-strict-backend", "--sanitize", "address", "--mount", f"{ROOT}:/b",
        ]
    )  # fmt: skip
    assert given == expected
    assert (given.strict_backend, given.sanitize, given.reports) == (
        False,
        "address",
        Path("reports/shard-1-of-2"),
    )
    assert [m.target for m in given.mounts] == ["/a", "/b"]
    assert rest == ["-k", "parity", "-x"]


@pytest.mark.parametrize("inside", ["--no-strict-backend", "--sanitize=address", "--memory 2g"])
def test_check_refuses_a_matrix_option_inside_its_pytest_string(
    inside: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tritonpt import cli  # noqa: PLC0415
    from tritonpt.matrix import run  # noqa: PLC0415

    monkeypatch.setattr(run, "run", lambda given, rest: pytest.fail("the matrix ran"))
    values = {name: OPTIONS[name].default for name in inspect.signature(cli.check).parameters}
    values["pytest"] = f"-x {inside}"
    with pytest.raises(SystemExit) as ended:
        cli.check(**values)
    assert ended.value.code != 0
    said = capsys.readouterr().err
    flag = inside.split("=", maxsplit=1)[0].split(maxsplit=1)[0]
    assert f"holds {flag}, an option of the matrix: give it to `tritonpt check` itself" in " ".join(
        said.split()
    )
