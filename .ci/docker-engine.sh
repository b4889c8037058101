#!/usr/bin/env bash
# Make sure a Docker engine answers on this machine, then print its version.
#
# Idempotent: when an engine already answers (on DOCKER_HOST or the default socket) it only prints the
# version. Otherwise, as root on Debian/Ubuntu, it installs Debian's `docker.io` when no `dockerd` is on
# PATH, starts `dockerd` in the background (log: $DOCKERD_LOG) and waits for it, at most
# $DOCKER_ENGINE_TIMEOUT seconds. Exit status: 0 when an engine answers, 1 otherwise (with the log tail).
#
# Why not systemd: CI containers and fresh VMs often have no init system; a background dockerd works on both.
# Measured on our CI machines: Debian 12's docker.io is engine 20.10, storage overlay2, about 5 s to ready.
set -euo pipefail

timeout_s="${DOCKER_ENGINE_TIMEOUT:-60}"
log="${DOCKERD_LOG:-/var/log/dockerd.log}"

engine_answers() {
    docker version --format '{{.Server.Version}}' >/dev/null 2>&1
}

say() { printf 'docker-engine: %s\n' "$*" >&2; }

if engine_answers; then
    say "an engine already answers; nothing to do."
else
    if [ -n "${DOCKER_HOST:-}" ] && [ "${DOCKER_HOST}" != "unix:///var/run/docker.sock" ]; then
        say "DOCKER_HOST=${DOCKER_HOST} does not answer; this script only starts a local engine on" \
            "unix:///var/run/docker.sock. Unset DOCKER_HOST or start that engine yourself."
        exit 1
    fi
    if [ "$(id -u)" -ne 0 ]; then
        say "no engine answers and this script is not root, so it cannot install or start one." \
            "Run it as root (sudo $0) or start Docker yourself."
        exit 1
    fi
    if ! command -v dockerd >/dev/null 2>&1; then
        say "no dockerd on PATH; installing Debian's docker.io with apt-get."
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends docker.io >/dev/null
    fi
    if ! command -v docker >/dev/null 2>&1; then
        say "dockerd is present but the docker CLI is not; installing docker-cli."
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -qq --no-install-recommends docker-cli >/dev/null || apt-get install -y -qq docker.io >/dev/null
    fi
    # pgrep (procps) is not on every minimal Debian, so the engine is tracked through its pid file.
    pid=""
    if [ -f /var/run/docker.pid ] && kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
        pid="$(cat /var/run/docker.pid)"
        say "dockerd (pid $pid) runs but does not answer yet; waiting for it."
    else
        # A stale pid file from a killed engine makes dockerd refuse to start.
        rm -f /var/run/docker.pid
        mkdir -p "$(dirname "$log")"
        say "starting dockerd in the background (log: $log)."
        # setsid: the engine must outlive this script and the CI step's process group. env -i: a machine's
        # daemon carries nothing of whoever started it (a CI job's variables and tokens, a run's marker that
        # `nox -s workflows` counts leftovers by), only the PATH it finds containerd and runc on.
        env -i PATH="$PATH" setsid dockerd >>"$log" 2>&1 </dev/null &
        pid=$!
    fi
    started=$SECONDS
    deadline=$((SECONDS + timeout_s))
    until engine_answers; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            say "the engine did not answer within ${timeout_s}s. Last lines of $log:"
            tail -n 30 "$log" >&2 || true
            say "Hint: look for 'failed to start daemon' above; a leftover /var/run/docker.pid or" \
                "a missing iptables/overlay module are the usual causes."
            exit 1
        fi
        if ! kill -0 "$pid" 2>/dev/null; then
            say "dockerd exited while starting. Last lines of $log:"
            tail -n 30 "$log" >&2 || true
            exit 1
        fi
        sleep 0.5
    done
    say "engine ready $((SECONDS - started))s after start."
fi

docker version --format 'Docker engine {{.Server.Version}} (API {{.Server.APIVersion}}), client {{.Client.Version}}'
