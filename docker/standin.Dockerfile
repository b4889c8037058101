# Offline stand-in for nvcr.io/nvidia/tritonserver:<release>-pyt-python-py3, so that CI can build and run the
# project's real recipe (docker/ngc.Dockerfile) on a machine that cannot pull any image.
#
# Built by `python -m tritonpt.standin` (src/tritonpt/standin.py), never by hand: it assembles the build context
# (never the repository) from the nvidia-pytriton wheel and passes every build argument:
#   STANDIN_BASE             the Debian bookworm image made with debootstrap + `docker import` (python3 3.11,
#                            libpython3.11, python3-numpy, ca-certificates)
#   PYTRITON_VERSION         versions.toml [embedded] pytriton: the wheel the server comes from
#   EMBEDDED_SERVER_VERSION  versions.toml [embedded] server (2.51.0): what this tritonserver really is
#   EMBEDDED_NGC             versions.toml [embedded] ngc (24.10): the NGC release the wheel's server was taken from
#
# What it mirrors from the NGC image (server build.py, dockerfile_prepare_container_linux): tritonserver in
# /opt/tritonserver/bin on PATH, backends in /opt/tritonserver/backends, user triton-server with uid/gid 1000,
# ENV TRITON_SERVER_VERSION / NVIDIA_TRITON_SERVER_VERSION, label com.nvidia.tritonserver.version, ENTRYPOINT
# /opt/nvidia/nvidia_entrypoint.sh, python3 on PATH. What differs, on purpose:
#   - the server is 2.51.0 from the wheel (glibc 2.34 at most), not the release versions.toml names;
#   - backends/pytorch holds the Python-based backend (src/tritonpt/backend/pytorch/model.py) instead of
#     libtriton_pytorch.so, and torch is NOT in the image: run the container with the host venv's
#     site-packages mounted read-only at /usr/local/lib/python3.11/dist-packages (tritonpt.standin.run_settings;
#     PYTHONPATH does not work: the backend stub's embedded interpreter ignores it);
#   - no curl, no CUDA, no NVIDIA banner.
ARG STANDIN_BASE
FROM ${STANDIN_BASE}

ARG PYTRITON_VERSION
ARG EMBEDDED_SERVER_VERSION
ARG EMBEDDED_NGC

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

ENV TRITON_SERVER_VERSION=${EMBEDDED_SERVER_VERSION} \
    NVIDIA_TRITON_SERVER_VERSION=${EMBEDDED_NGC} \
    TRITON_SERVER_USER=triton-server \
    PATH=/opt/tritonserver/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LD_LIBRARY_PATH=/opt/tritonserver/lib

# NGC creates its non-root user the same way (uid and gid 1000).
RUN useradd --uid 1000 --user-group --no-create-home triton-server

# tritonserver, its bundled libraries (the wheel's nvidia_pytriton.libs, found through LD_LIBRARY_PATH and the
# binary's RPATH ${ORIGIN}/../lib), the Python backend, the local cache, and the stubs of every Python version.
COPY tritonserver/ /opt/tritonserver/
COPY standin-entrypoint.sh /opt/nvidia/nvidia_entrypoint.sh

# Keep only the Python backend stub that matches this image's python3 (the wheel's libtriton_python.so
# looks for it next to itself).
RUN py="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
    && test -x "/opt/tritonserver/python_backend_stubs/${py}/triton_python_backend_stub" \
    && mv "/opt/tritonserver/python_backend_stubs/${py}/triton_python_backend_stub" /opt/tritonserver/backends/python/ \
    && rm -rf /opt/tritonserver/python_backend_stubs \
    && mkdir -p /opt/tritonserver/backends/pytorch \
    && chmod 0755 /opt/nvidia/nvidia_entrypoint.sh

# The Python-based pytorch backend, when the build context has it (standin.py copies
# src/tritonpt/backend/pytorch/model.py here; the folder may hold only a README until that file exists).
COPY pytorch/ /opt/tritonserver/backends/pytorch/

LABEL com.nvidia.tritonserver.version="${EMBEDDED_SERVER_VERSION}" \
      io.tritonpt.standin="triton" \
      io.tritonpt.standin.pytriton="${PYTRITON_VERSION}" \
      io.tritonpt.standin.server="${EMBEDDED_SERVER_VERSION}" \
      io.tritonpt.standin.ngc="${EMBEDDED_NGC}"

WORKDIR /opt/tritonserver
ENTRYPOINT ["/opt/nvidia/nvidia_entrypoint.sh"]
