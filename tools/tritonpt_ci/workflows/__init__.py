"""The repository's GitHub Actions workflows run on this machine with act, offline, and held by tests.

spec       what the workflow files say: pinned actions, the nox sessions each job runs; ``audit`` holds them to
           the noxfile and to the actions index (versions.toml [workflows.actions])
actions    the pinned actions from a folder of their tarballs, each checked against its sha256
host       this machine as the self-hosted runner: the tool cache, a home of the run's own, the jobs' environment
           (nothing named like a secret), and what a run leaves behind
report     act's JSON log as jobs and steps with outcome and seconds, artifacts and job summaries
runner     one run: act's command line, its servers on 127.0.0.1, cancel, the result

python -m tritonpt_ci.workflows --workflow .github/workflows/ci.yml --job merge     (nox -s workflows -- ...)
"""
