#!/bin/sh
# Stand-in for /opt/nvidia/nvidia_entrypoint.sh of the NGC images (used by tritonpt_ci/standin.Dockerfile only).
# The real one prints the NVIDIA banner, checks the driver and shared-memory size, then runs the command;
# the stand-in only runs the command, so recipes that keep NGC's ENTRYPOINT behave the same on both.
if [ "$#" -eq 0 ]; then
    exec /bin/bash
fi
exec "$@"
