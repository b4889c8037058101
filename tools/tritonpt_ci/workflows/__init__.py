"""The repository's GitHub Actions workflows run on this machine with act, offline (`nox -s workflows`).

spec       what the workflow files say; ``audit`` holds them to the noxfile and the actions index
actions    the pinned actions from a folder of their tarballs, each checked against its sha256
host       this machine as the self-hosted runner: tool cache, home, the jobs' environment, leftovers
report     act's JSON log as jobs and steps with outcome and seconds, artifacts and job summaries
runner     one run: act's command line, its servers on 127.0.0.1, cancel, the result
"""
