"""Stage "matrix": the integration matrix, a pytest plugin that ships in the wheel (``tritonpt check``).

    settings.py   what a run is asked to do, typed: built once by the door, handed to pytest as a plugin
    conftest.py   the harness: validation, one Triton for the session, the watchdog, the reports
    models.py     the models under test and the probe models
    test_*.py     the checks: health, backend, parity, batching, bad requests, errors, model control, stats
    run.py        the command: the backend builds the repository needs, then pytest on this package

Run as ``python -m tritonpt.matrix [OPTIONS] [PYTEST ARGS]``, ``tritonpt check`` or ``nox -s integration``.
"""
