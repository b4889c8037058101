# Offline stand-in for pytorch/pytorch:<torch>-cuda<cuda>-cudnn9-devel, the base of docker/pytorch.Dockerfile's
# backend stage, so that CI runs that stage's own build step on a machine that cannot pull any image.
#
# Built by `python -m tritonpt_ci.standin --pytorch-devel` (tools/tritonpt_ci/standin/pytorch.py), never by hand: the context holds
# this file and the torch package of the host environment (the same torch 2.9.1 wheel the real image carries in
# /opt/conda), nothing else. Build arguments:
#   STANDIN_BASE    the Debian bookworm image made with debootstrap + `docker import` (python3 3.11)
#   TORCH_VERSION   the copied torch's version, for the label
#
# What differs from the real image, on purpose: Debian's python3 and g++ 12 instead of conda's Python and the
# CUDA 12.8 toolkit (so only the CPU variant builds here), torch in Debian's dist-packages, no nvidia/* wheels.
ARG STANDIN_BASE
FROM ${STANDIN_BASE}

ARG TORCH_VERSION

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# The compilers and Python headers the real devel image has (apt reaches the Debian mirror; PyPI is not needed).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends g++ libpython3.11-dev \
    && rm -rf /var/lib/apt/lists/*

COPY torch/ /usr/local/lib/python3.11/dist-packages/torch/

LABEL io.tritonpt.standin="pytorch-devel" \
      io.tritonpt.standin.torch="${TORCH_VERSION}"
