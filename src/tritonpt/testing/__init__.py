"""What only tests and CI use, kept apart from what users run (as ``structlog.testing`` is).

    standin      offline stand-ins for the registry images (NGC Triton, pytorch/pytorch devel), built with
                 debootstrap and docker import, so CI builds and runs the real recipes without any registry
    reliability  the reliability report merged from the parts the tiers wrote (tritonpt.parts; `nox -s reliability`)
    crash        whether a matrix run ended because Triton crashed on its own, the known crash it matched, CI's
                 one rerun of a known one (the reliability part matrix-runs)
    crash_hunt   the matrix N times, each crash counted and kept with its backtrace (`nox -s crash-hunt`)
    overhead     the integration matrix against a bare script, and the first command by stage (`nox -s bench`)
    scaling      the main job on 1 to 50 models, unsharded and as 2 shards (`nox -s bench-scaling`)
    soak         10,000 requests against one server: parity, exact counters, bounded memory (`nox -s soak`)
    zoo          public architectures exported and served with parity (`nox -s zoo`)
    qa           NVIDIA's own QA tests of the pytorch backend against our builds (`nox -s triton-qa`)
    workflows    .github/workflows run under act on this machine, offline (`nox -s workflows`)
    procs        this machine's processes as /proc shows them: a run's leftovers, a process tree signalled

Beside them, package data that standin builds from: standin.Dockerfile, standin-pytorch.Dockerfile and
standin-entrypoint.sh.

No runtime module imports this package; tests/unit/test_layout.py checks it. It is not in the wheel
(pyproject.toml excludes it; tests/system/test_install.py checks that): a checkout runs it, installed editable.
"""
