"""This repository's own CI programs, beside the package and never in the wheel: the stand-in images, the QA,
soak, cycles, zoo, compat and workflow tiers, the crash hunt, the reliability report, the shared environments and
the run's timings. nox puts ``tools/`` on PYTHONPATH beside ``src/`` (:mod:`tritonpt_ci.venvs`). They may import
tritonpt; nothing in tritonpt imports them (tests/unit/test_layout.py). Which session runs which program:
docs/reference/tasks-and-sessions.md.
"""
