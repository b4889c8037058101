"""Stage "matrix": the integration matrix, a pytest plugin that ships in the wheel, so that the main job runs from
the installed package in a user's own folder (``tritonpt check``) exactly as it runs in this repository
(``nox -s integration``).

    conftest.py   the harness: its options, the validator first, one Triton for the session (a local process, a
                  container or a URL), the watchdog, the reports (junit.xml, summary.md and .json, the server log)
    models.py     the models under test and the probe models, as the repository holds them
    test_*.py     the checks: health and the three ports, the official backend and the platform, parity (HTTP and
                  gRPC, every reference case), dynamic batching, bad requests, error paths, model control, statistics
    run.py        the command: build or reuse the backend builds the repository needs, then pytest on this package
                  with its own settings (pytest.ini here)

    python -m tritonpt.matrix [OPTIONS] [PYTEST ARGS]     (tritonpt check, nox -s integration)
"""
