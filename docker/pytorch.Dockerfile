# Triton on the user's own PyTorch image: pytorch/pytorch:2.9.1-cuda12.8-cudnn9-runtime extended with Triton
# server 2.51.0 and the official pytorch backend compiled against that image's libtorch. Use it when the host
# driver is older than the R580 that the NGC 25.10 image needs (CUDA 12.8 needs R570, or R525+ with minor-version
# compatibility), or when the server must run the very torch the models were exported with.
#
#   invoke build-image --recipe pytorch [--sources DIR]     (the build context is made by tritonpt.image)
#   docker run --gpus all --shm-size=1g -p 8000:8000 -p 8001:8001 -p 8002:8002 \
#       -v "$PWD/model_repository:/models:ro" tritonpt:pytorch-2.9.1
#
# One build definition: the backend stage runs `python3 -m tritonpt.backend`, the code behind
# `invoke build-backend`, on the pinned sources of versions.toml [backend] (pytorch_backend, backend, core,
# common at r25.10, RapidJSON, googletest; sha256 checked) with CMake from the PyPI wheel. The context carries
# all of them, so the stage needs no GitHub and no PyPI. r25.10's backend API (1.19) is the server's. The PT2 build
# ([pt2]: pytorch_backend r26.05 against server 2.51.0's own core r24.10) is built the same way beside it, stock or
# with our patches (PT2_FLAVOR), so that the image serves torch_aoti models as the embedded server does.
#
# SEEN (2026-12-01, CPU only): CI builds the backend stage (`--target backend`, BACKEND_VARIANT=cpu) on an offline
#   stand-in of the devel base (Debian bookworm with the same torch 2.9.1 wheel); the same code built outside
#   Docker serves the integration matrix on server 2.51.0 with parity error 0.
# UNVERIFIED: the real pytorch/pytorch bases (no registry here); the GPU variant in this stage (CUDA 12.8
#   toolkit of the devel image); stages 2 and 3 (they pip-install nvidia-pytriton); two CUDA runtimes in one
#   process (the server's bundled cudart 12.6 and torch's 12.8) on a GPU.
#
# Choices (sources: pytorch/pytorch's docker.Makefile and Dockerfile, NGC's Triton release notes, pytriton's
# build scripts, and what was measured on our machines): the base is Ubuntu 22.04,
# glibc 2.35, torch in /opt/conda; every Triton image from 24.11 on needs glibc 2.39, so the server is 2.51.0 from
# the nvidia-pytriton wheel (at most GLIBC_2.35); 24.10's own backend bundles libtorch 2.5, too old for TorchScript
# saved by 2.9, hence a backend built here. Only libtriton_pytorch.so is kept: its RPATH points at the base's own
# torch/lib and nvidia/cuda_runtime/lib. The final stage has no compiler; a RUN step fails the build if ldd finds
# an unresolved library. Build arguments all come from src/tritonpt/versions.toml (tritonpt.image.recipe_build_args);
# tests/unit/test_image.py checks the defaults. Classic builder and BuildKit alike (no RUN --mount, no heredocs).
# Private registries: `docker login` on the host; never put secrets in --build-arg.
ARG PYTORCH_IMAGE=pytorch/pytorch:2.9.1-cuda12.8-cudnn9-runtime
ARG PYTORCH_DEVEL_IMAGE=pytorch/pytorch:2.9.1-cuda12.8-cudnn9-devel

# --- 1. libtriton_pytorch.so against the base's own libtorch, by tritonpt.backend ----------------------------
FROM ${PYTORCH_DEVEL_IMAGE} AS backend
ARG BACKEND_VARIANT=gpu
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# Build-only stage: the distribution's compiler is fine, nothing of it ships.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential \
    && rm -rf /var/lib/apt/lists/*
COPY python/ /build/python/
COPY third_party/ /build/third_party/
# And the PT2 build (pytorch_backend [pt2], r26.05) beside it, as backends/pt2/libtriton_pt2.so: server 2.51.0's core
# takes torch_aoti only under a backend name it does not know. Stock unless PT2_FLAVOR names our patch set
# (`invoke build-image --recipe pytorch --pt2-build patched` passes "+tritonpt.1"). The options are build-backend's.
ARG PT2_FLAVOR
RUN PYTHONPATH=/build/python python3 -m tritonpt.backend --sources /build/third_party \
        --pt2 ${PT2_FLAVOR:+--pt2-build patched} \
        --variant "${BACKEND_VARIANT}" --cache /build/cache --copy-to /opt/tritonserver/backends \
    && rm -rf /build/cache

# --- 2. Triton server 2.51.0 (NGC 24.10) from the nvidia-pytriton wheel, with the backend wired in ----------
FROM ${PYTORCH_IMAGE} AS server
ARG PYTRITON_VERSION
ARG EMBEDDED_SERVER_VERSION
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends patchelf \
    && rm -rf /var/lib/apt/lists/*
COPY --from=backend /opt/tritonserver/backends/pytorch/ /opt/tritonserver/backends/pytorch/
COPY --from=backend /opt/tritonserver/backends/pt2/ /opt/tritonserver/backends/pt2/
RUN python -m pip install --no-cache-dir --no-deps --target /tmp/pytriton "nvidia-pytriton==${PYTRITON_VERSION}" \
    && wheel=/tmp/pytriton/pytriton/tritonserver \
    && py="$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
    && torch_dir="$(python -c 'import os, torch; print(os.path.dirname(torch.__file__))')" \
    && site="$(dirname "${torch_dir}")" \
    && mkdir -p /opt/tritonserver/lib /opt/tritonserver/backends \
    && cp -a "${wheel}/bin" "${wheel}/caches" /opt/tritonserver/ \
    && cp -a "${wheel}/backends/python" /opt/tritonserver/backends/ \
    && cp "${wheel}/python_backend_stubs/${py}/triton_python_backend_stub" /opt/tritonserver/backends/python/ \
    && cp -a /tmp/pytriton/nvidia_pytriton.libs/. /opt/tritonserver/lib/ \
    && ln -s "$(python -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))')/libpython${py}.so.1.0" \
        /opt/tritonserver/lib/ \
    && server_lib="$(basename /opt/tritonserver/lib/libtritonserver-*.so)" \
    && if [ ! -e "/opt/tritonserver/lib/${server_lib}" ]; then \
        echo "error: nvidia-pytriton ${PYTRITON_VERSION} has no libtritonserver; expected server ${EMBEDDED_SERVER_VERSION}." >&2; \
        exit 1; \
    fi \
    && for library in /opt/tritonserver/backends/pytorch/libtriton_pytorch.so \
            /opt/tritonserver/backends/pt2/libtriton_pt2.so; do \
        patchelf --replace-needed libtritonserver.so "${server_lib}" "${library}" \
        && patchelf --set-rpath "\$ORIGIN:${torch_dir}/lib:${site}/nvidia/cuda_runtime/lib" "${library}"; \
    done \
    && rm -rf /tmp/pytriton

# --- 3. The image: the user's runtime base + /opt/tritonserver ---------------------------------------------
FROM ${PYTORCH_IMAGE}
ARG PYTORCH_IMAGE
ARG TORCH_VERSION
ARG PYTORCH_CUDA
ARG PYTRITON_VERSION
ARG EMBEDDED_SERVER_VERSION
ARG EMBEDDED_NGC
ARG PYTORCH_BACKEND_REF
ARG PYTORCH_BACKEND_COMMIT
ARG PT2_BACKEND_REF
ARG PT2_BACKEND_COMMIT
ARG PT2_FLAVOR
ARG BACKEND_VARIANT=gpu
ARG TRITONPT_VERSION
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
USER 0:0

COPY --from=server /opt/tritonserver /opt/tritonserver

# Same names as NGC images, so tools that read them work on both.
ENV TRITON_SERVER_VERSION=${EMBEDDED_SERVER_VERSION} \
    NVIDIA_TRITON_SERVER_VERSION=${EMBEDDED_NGC} \
    TRITON_SERVER_USER=triton-server \
    PATH=/opt/tritonserver/bin:${PATH} \
    LD_LIBRARY_PATH=/opt/tritonserver/lib:/usr/local/nvidia/lib:/usr/local/nvidia/lib64 \
    TRITONPT_HTTP_PORT=8000

# Fail now, not at model load, if a library cannot be found or the torch is not the one asked for.
RUN missing="$(ldd /opt/tritonserver/bin/tritonserver /opt/tritonserver/backends/python/triton_python_backend_stub \
            /opt/tritonserver/backends/pytorch/libtriton_pytorch.so /opt/tritonserver/backends/pt2/libtriton_pt2.so \
            | grep 'not found' || true)" \
    && if [ -n "${missing}" ]; then echo "error: unresolved libraries:" >&2; echo "${missing}" >&2; exit 1; fi \
    && have="$(python -c 'import torch; print(torch.__version__.split("+")[0])')" \
    && if [ "${have}" != "${TORCH_VERSION}" ]; then \
        echo "error: ${PYTORCH_IMAGE} has torch ${have}, not ${TORCH_VERSION}." >&2; exit 1; \
    fi \
    && useradd --uid 1000 --user-group --no-create-home triton-server \
    && mkdir -p /models

EXPOSE 8000 8001 8002

HEALTHCHECK --interval=15s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python3", "-I", "-S", "-c", "import os, sys, urllib.request as r; url = 'http://127.0.0.1:' + os.environ.get('TRITONPT_HTTP_PORT', '8000') + '/v2/health/ready'; sys.exit(0 if r.urlopen(url, timeout=4).status == 200 else 1)"]

LABEL org.opencontainers.image.title="tritonpt Triton ${EMBEDDED_SERVER_VERSION} on ${PYTORCH_IMAGE}" \
      org.opencontainers.image.description="Triton Inference Server ${EMBEDDED_SERVER_VERSION} (NGC ${EMBEDDED_NGC}, from nvidia-pytriton ${PYTRITON_VERSION}) with pytorch_backend ${PYTORCH_BACKEND_REF} compiled against torch ${TORCH_VERSION}; mount the model repository at /models." \
      org.opencontainers.image.version="${TRITONPT_VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${PYTORCH_IMAGE}" \
      io.tritonpt.recipe="pytorch" \
      io.tritonpt.torch="${TORCH_VERSION}" \
      io.tritonpt.triton-server="${EMBEDDED_SERVER_VERSION}" \
      io.tritonpt.ngc="${EMBEDDED_NGC}" \
      io.tritonpt.cuda="${PYTORCH_CUDA}" \
      io.tritonpt.backend-torch="${TORCH_VERSION}" \
      io.tritonpt.backend-ref="${PYTORCH_BACKEND_REF}" \
      io.tritonpt.backend-commit="${PYTORCH_BACKEND_COMMIT}" \
      io.tritonpt.backend-variant="${BACKEND_VARIANT}" \
      io.tritonpt.pt2-backend="${PT2_BACKEND_REF}${PT2_FLAVOR} ${PT2_BACKEND_COMMIT}" \
      io.tritonpt.pytriton="${PYTRITON_VERSION}"

# The APIs that change a running server answer only to the key the operator gives at run time (see ngc.Dockerfile).
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

WORKDIR /opt/tritonserver
USER 1000:1000
CMD ["tritonpt-serve", "--model-repository=/models"]
