"""What only tests and CI use, kept apart from what users run (as ``structlog.testing`` is).

    standin   offline stand-ins for the registry images (NGC Triton, pytorch/pytorch devel), built with
              debootstrap and docker import, so CI builds and runs the real recipes without any registry
    soak      10,000 requests against one server: parity, exact counters, bounded memory (`nox -s soak`)
    parts     the reliability report's parts, one JSON file per tier, written atomically

No runtime module imports this package; tests/unit/test_layout.py checks it.
"""
