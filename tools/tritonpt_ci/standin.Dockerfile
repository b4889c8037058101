# Offline stand-in for nvcr.io/nvidia/tritonserver:<release>-pyt-python-py3, so that CI can build and run the
# project's real recipe (docker/ngc.Dockerfile) on a machine that cannot pull any image.
#
# Built by `python -m tritonpt_ci.standin` (tools/tritonpt_ci/standin/ngc.py), never by hand: it assembles the build context
# (never the repository) from the nvidia-pytriton wheel and the backend tritonpt.backend built, and passes every
# build argument:
#   STANDIN_BASE             the Debian bookworm image made with debootstrap + `docker import` (python3,
#                            ca-certificates)
#   PYTRITON_VERSION         versions.toml [embedded] pytriton: the wheel the server comes from
#   EMBEDDED_SERVER_VERSION  versions.toml [embedded] server (2.51.0): what this tritonserver really is
#   EMBEDDED_NGC             versions.toml [embedded] ngc (24.10): the NGC release the wheel's server was taken from
#   SITE_PACKAGES            where the host's site-packages is mounted at run time (tritonpt_ci.standin.run_settings)
#   BACKEND_REF / _COMMIT / _TORCH   what the official libtriton_pytorch.so in pytorch/ was built from and against
#   PT2_BACKEND              "<ref> <commit>" of the PT2 build in pt2/libtriton_pt2.so (pytorch_backend r26.05,
#                            for torch_aoti models under the second backend name, as the embedded server serves them)
#
# What it mirrors from the NGC image (server build.py, dockerfile_prepare_container_linux): tritonserver in
# /opt/tritonserver/bin on PATH, backends/pytorch/libtriton_pytorch.so, user triton-server with uid/gid 1000,
# ENV TRITON_SERVER_VERSION / NVIDIA_TRITON_SERVER_VERSION, label com.nvidia.tritonserver.version, ENTRYPOINT
# /opt/nvidia/nvidia_entrypoint.sh, python3 on PATH. What differs, on purpose:
#   - the server is 2.51.0 from the wheel (glibc 2.34 at most), not the release versions.toml names;
#   - the pytorch backend is the official one built from the pinned r25.10 sources against the host's torch, and
#     libtorch is NOT in the image: run the container with the host venv's site-packages mounted read-only at
#     ${SITE_PACKAGES} (its torch/lib is on LD_LIBRARY_PATH below);
#   - no Python backend, no curl, no CUDA, no NVIDIA banner.
ARG STANDIN_BASE
FROM ${STANDIN_BASE}

ARG PYTRITON_VERSION
ARG EMBEDDED_SERVER_VERSION
ARG EMBEDDED_NGC
ARG SITE_PACKAGES
ARG BACKEND_REF
ARG BACKEND_COMMIT
ARG BACKEND_TORCH
ARG PT2_BACKEND

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

ENV TRITON_SERVER_VERSION=${EMBEDDED_SERVER_VERSION} \
    NVIDIA_TRITON_SERVER_VERSION=${EMBEDDED_NGC} \
    TRITON_SERVER_USER=triton-server \
    PATH=/opt/tritonserver/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LD_LIBRARY_PATH=/opt/tritonserver/lib:${SITE_PACKAGES}/torch/lib

# NGC creates its non-root user the same way (uid and gid 1000).
RUN useradd --uid 1000 --user-group --no-create-home triton-server

# tritonserver, its bundled libraries (the wheel's nvidia_pytriton.libs, found through LD_LIBRARY_PATH and the
# binary's RPATH ${ORIGIN}/../lib) and the local cache; then the official pytorch backend.
COPY tritonserver/ /opt/tritonserver/
COPY pytorch/ /opt/tritonserver/backends/pytorch/
COPY pt2/ /opt/tritonserver/backends/pt2/
COPY standin-entrypoint.sh /opt/nvidia/nvidia_entrypoint.sh

# The backend links libtritonserver.so; the wheel names it libtritonserver-<hash>.so.
RUN lib="$(basename /opt/tritonserver/lib/libtritonserver-*.so)" \
    && test -e "/opt/tritonserver/lib/${lib}" \
    && ln -s "${lib}" /opt/tritonserver/lib/libtritonserver.so \
    && chmod 0755 /opt/nvidia/nvidia_entrypoint.sh

LABEL com.nvidia.tritonserver.version="${EMBEDDED_SERVER_VERSION}" \
      io.tritonpt.standin="triton" \
      io.tritonpt.standin.pytriton="${PYTRITON_VERSION}" \
      io.tritonpt.standin.server="${EMBEDDED_SERVER_VERSION}" \
      io.tritonpt.standin.ngc="${EMBEDDED_NGC}" \
      io.tritonpt.standin.backend-ref="${BACKEND_REF}" \
      io.tritonpt.standin.backend-commit="${BACKEND_COMMIT}" \
      io.tritonpt.standin.backend-torch="${BACKEND_TORCH}" \
      io.tritonpt.pt2-backend="${PT2_BACKEND}"

WORKDIR /opt/tritonserver
ENTRYPOINT ["/opt/nvidia/nvidia_entrypoint.sh"]
