# Recommended recipe: NVIDIA's Triton image whose pytorch backend bundles PyTorch 2.9, ready for a model
# repository exported by tritonpt.
#
#   invoke build-image --recipe ngc            (build args from src/tritonpt/versions.toml)
#   invoke build-image --recipe ngc --ngc 26.05   (another release of versions.toml's table; 26.03 to 26.08 serve
#                                                  torch_aoti with the stock backend's known bugs; a fact NVIDIA's
#                                                  notes do not state is passed, and labelled, as "not stated")
#   docker build -t tritonpt:ngc-25.10 --build-arg TRITON_NGC=25.10 ... - < docker/ngc.Dockerfile
#   docker run --gpus all --shm-size=1g -p 8000:8000 -p 8001:8001 -p 8002:8002 \
#       -v "$PWD/model_repository:/models:ro" tritonpt:ngc-25.10
#
# Base: nvcr.io/nvidia/tritonserver:<release>-pyt-python-py3 ("PyTorch and Python backends only", NGC tag
# table). 25.10 = server 2.62.0, pytorch backend with PyTorch 2.9.0a0, CUDA 13.0, Ubuntu 24.04, Python 3.12,
# needs an R580 driver (NGC Triton 25.10 release notes). Models exported with torch 2.9.1 load there: same
# TorchScript format and operator set.
#
# Build context: none. The recipe copies nothing, so the Dockerfile alone is sent (stdin above, or
# `invoke build-image`): no venv, no model file ever reaches the engine. The model repository is mounted at
# run time, read-only, at /models; it must be readable by uid 1000.
#
# Build arguments: every one comes from versions.toml (tritonpt.image.recipe_build_args); the default of
# TRITON_IMAGE equals versions.toml and tests/unit/test_image.py checks that it stays so. Caveat: the base image
# sets ENV TRITON_SERVER_VERSION, and an inherited ENV wins over an ARG of the same name (seen with the
# classic builder; Dockerfile reference, "Using ARG variables"), so the io.tritonpt.triton-server label
# records the server the base really carries; the build argument is used only by bases without that ENV.
# The release is checked instead through NGC's ENV NVIDIA_TRITON_SERVER_VERSION against TRITON_NGC.
#
# Works with the classic builder (Docker 20.10, docker-py, testcontainers) and with BuildKit: no RUN --mount,
# no heredocs, no `# syntax=` line (it would make BuildKit pull a frontend image).
# Private registry: `docker login nvcr.io` on the host (user $oauthtoken, password: NGC API key); the engine
# pulls FROM with those credentials and they never reach a layer. Never pass secrets as --build-arg.
#
# CI builds this very file FROM an offline stand-in (python -m tritonpt_ci.standin): everything below must also
# work on a Debian base without curl, CUDA or a GPU.
ARG TRITON_IMAGE=nvcr.io/nvidia/tritonserver:25.10-pyt-python-py3
FROM ${TRITON_IMAGE}

ARG TRITON_IMAGE
ARG TRITON_NGC
ARG TRITON_SERVER_VERSION
ARG TRITON_BACKEND_TORCH
ARG TRITON_BACKEND_REF
ARG TRITON_BACKEND_COMMIT
ARG TRITON_BACKEND_VARIANT
ARG TRITON_CUDA
ARG TRITON_MIN_DRIVER
ARG TORCH_VERSION
ARG TRITONPT_VERSION

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

USER 0:0

# Fail the build early, with a sentence, when the base is not the Triton release we were asked for or lacks
# the pytorch backend (for example a -py3-min image). Then make sure the non-root user NGC images carry
# (triton-server, uid/gid 1000, server build.py) exists, and create the mount point for the repository.
RUN if [ -n "${TRITON_NGC}" ] && [ -n "${NVIDIA_TRITON_SERVER_VERSION:-}" ] \
        && [ "${NVIDIA_TRITON_SERVER_VERSION}" != "${TRITON_NGC}" ]; then \
        echo "error: ${TRITON_IMAGE} is Triton ${NVIDIA_TRITON_SERVER_VERSION}, not ${TRITON_NGC}:" \
             "pass a matching --build-arg TRITON_NGC or TRITON_IMAGE." >&2; exit 1; \
    fi \
    && if ! command -v tritonserver >/dev/null; then \
        echo "error: ${TRITON_IMAGE} has no tritonserver on PATH; use a Triton server image." >&2; exit 1; \
    fi \
    && if [ ! -d /opt/tritonserver/backends/pytorch ]; then \
        echo "error: ${TRITON_IMAGE} has no pytorch backend (/opt/tritonserver/backends/pytorch);" \
             "use the -pyt-python-py3 or -py3 image of the release." >&2; exit 1; \
    fi \
    && if [ ! -x /opt/nvidia/nvidia_entrypoint.sh ]; then \
        echo "error: ${TRITON_IMAGE} has no /opt/nvidia/nvidia_entrypoint.sh (every NGC image has one)." >&2; exit 1; \
    fi \
    && if ! command -v python3 >/dev/null; then \
        echo "error: ${TRITON_IMAGE} has no python3 (the health check and the Python backend need it)." >&2; exit 1; \
    fi \
    && if ! getent passwd 1000 >/dev/null; then \
        groupadd --gid 1000 triton-server && useradd --uid 1000 --gid 1000 --no-create-home triton-server; \
    fi \
    && mkdir -p /models

# The APIs that change a running server (model-repository, shared-memory, trace, logging) answer only to the key
# the operator gives at run time: docker run -e TRITONPT_ADMIN_KEY=... (docs/guide/ci-and-gpu.md).
# The script's lines are written as they are: their $ expand when it runs, not here.
# hadolint ignore=SC2016
RUN printf '%s\n' \
        '#!/bin/sh' \
        '# tritonpt-serve: tritonserver with the API groups that change the server behind a key the operator gives' \
        '# at run time ($TRITONPT_ADMIN_KEY; header $TRITONPT_ADMIN_HEADER, default admin-key). Without a key they' \
        '# are locked behind a random one that nothing outside this process holds. Clients keep health, metadata,' \
        '# model config, inference and statistics.' \
        'set -eu' \
        'groups=model-repository,shared-memory,trace,logging' \
        'header="${TRITONPT_ADMIN_HEADER:-admin-key}"' \
        'key="${TRITONPT_ADMIN_KEY:-}"' \
        '[ -n "$key" ] || key="$(od -An -N32 -tx1 /dev/urandom | tr -d " \n")"' \
        'unset TRITONPT_ADMIN_KEY' \
        'exec tritonserver "--http-restricted-api=$groups:$header=$key" "--grpc-restricted-protocol=$groups:$header=$key" "$@"' \
        > /usr/local/bin/tritonpt-serve \
    && chmod 0755 /usr/local/bin/tritonpt-serve

ENV TRITONPT_HTTP_PORT=8000

EXPOSE 8000 8001 8002

# Ready = every model in /models loaded (tritonserver's default --strict-readiness). python3 is in every
# Triton image with the Python backend; curl is not in the stand-in. -I -S: stdlib only, whatever packages
# are installed or mounted.
HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python3", "-I", "-S", "-c", "import os, sys, urllib.request as r; url = 'http://127.0.0.1:' + os.environ.get('TRITONPT_HTTP_PORT', '8000') + '/v2/health/ready'; sys.exit(0 if r.urlopen(url, timeout=4).status == 200 else 1)"]

LABEL org.opencontainers.image.title="tritonpt Triton ${TRITON_NGC} + PyTorch" \
      org.opencontainers.image.description="Triton Inference Server ${TRITON_SERVER_VERSION} with its pytorch backend (PyTorch ${TRITON_BACKEND_TORCH}) for TorchScript models exported with torch ${TORCH_VERSION}; mount the model repository at /models." \
      org.opencontainers.image.version="${TRITONPT_VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${TRITON_IMAGE}" \
      io.tritonpt.recipe="ngc" \
      io.tritonpt.torch="${TORCH_VERSION}" \
      io.tritonpt.triton-server="${TRITON_SERVER_VERSION}" \
      io.tritonpt.ngc="${TRITON_NGC}" \
      io.tritonpt.cuda="${TRITON_CUDA}" \
      io.tritonpt.backend-torch="${TRITON_BACKEND_TORCH}" \
      io.tritonpt.backend-ref="${TRITON_BACKEND_REF}" \
      io.tritonpt.backend-commit="${TRITON_BACKEND_COMMIT}" \
      io.tritonpt.backend-variant="${TRITON_BACKEND_VARIANT}" \
      io.tritonpt.min-driver="${TRITON_MIN_DRIVER}"

WORKDIR /opt/tritonserver
USER 1000:1000

# NGC's entrypoint prints the banner, checks the driver, then runs the command; override the command to pass
# other tritonserver flags (keep TRITONPT_HTTP_PORT in step with --http-port), through tritonpt-serve to keep the
# admin APIs locked.
ENTRYPOINT ["/opt/nvidia/nvidia_entrypoint.sh"]
CMD ["tritonpt-serve", "--model-repository=/models"]
