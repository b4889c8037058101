#!/bin/bash
# Offered to triton-inference-server/server under its BSD-3-Clause license, for qa/L0_torch_aoti_parameters/.
#
# Backend parameters on the PT2 path: a value that does not parse must be refused at load (as the TorchScript path
# refuses it), and valid values applied (each logged as the TorchScript tests of qa/L0_libtorch_* check them).
# Fixed by 0004-pt2-parameters.patch (tritonpt docs/upstream/); the models come from
# qa/common/gen_qa_torch_aoti_batch_models.py. Laid out as qa/L0_torch_aoti/test.sh.

source ../common/util.sh

REPO_VERSION=${NVIDIA_TRITON_SERVER_VERSION}
if [[ "$#" -ge 1 ]]; then
    REPO_VERSION=$1
fi
if [[ -z "$REPO_VERSION" ]]; then
    echo -e "Repository version must be specified"
    echo -e "\n***\n*** Test Failed\n***"
    exit 1
fi
if [[ ! -z "$TEST_REPO_ARCH" ]]; then
    REPO_VERSION=${REPO_VERSION}_${TEST_REPO_ARCH}
fi

export CUDA_VISIBLE_DEVICES=0

MODELDIR=${MODELDIR:=`pwd`/models}
DATADIR=${DATADIR:="/data/inferenceserver/${REPO_VERSION}"}
TRITON_DIR=${TRITON_DIR:="/opt/tritonserver"}
SERVER=${TRITON_DIR}/bin/tritonserver
SERVER_ARGS="--model-repository=${MODELDIR} --log-verbose=1"
SERVER_LOG="./server.log"
CLIENT_LOG="./client.log"
RET=0
MODEL=torch_aoti_batch_float32

function with_parameter () {
    # $1 key, $2 value: a fresh copy of the model with one parameter
    rm -rf ${MODELDIR} && mkdir -p ${MODELDIR}
    cp -r ${DATADIR}/qa_model_repository/${MODEL} ${MODELDIR}/${MODEL}
    rm -f ${MODELDIR}/${MODEL}/config.pbtxt
    cp ${DATADIR}/qa_model_repository/${MODEL}/config.pbtxt ${MODELDIR}/${MODEL}/config.pbtxt
    echo """
parameters: {
    key: \"$1\"
    value: {
        string_value: \"$2\"
    }
}""" >> ${MODELDIR}/${MODEL}/config.pbtxt
    rm -f *.log
}

set +e

# A boolean that does not parse: the model must be refused at load.
with_parameter INFERENCE_MODE maybe
run_server
if [[ "${SERVER_PID}" != "0" ]]; then
    echo -e "\n***\n*** Unexpected server start with INFERENCE_MODE maybe\n***"
    kill ${SERVER_PID}; wait ${SERVER_PID}
    RET=1
fi
if [[ `grep -c "failed to convert 'maybe' to boolean" ${SERVER_LOG}` == "0" ]]; then
    cat ${SERVER_LOG}
    echo -e "\n***\n*** Failed. Expected \"failed to convert 'maybe' to boolean\" in the log\n***"
    RET=1
fi

# Valid values: applied, each as the backend logs it.
for SETTING in "INFERENCE_MODE true:Inference mode is enabled" \
               "INFERENCE_MODE false:Inference mode is disabled" \
               "ENABLE_CACHE_CLEANING true:Cache cleaning is enabled" \
               "DISABLE_CUDNN true:cuDNN is disabled" \
               "INTRA_OP_THREAD_COUNT 2:Intra op thread count is set to 2"; do
    PARAMETER=${SETTING%%:*}
    EXPECTED=${SETTING#*:}
    with_parameter ${PARAMETER}
    run_server
    if [[ "${SERVER_PID}" == "0" ]]; then
        cat ${SERVER_LOG}
        echo -e "\n***\n*** Failed to start ${SERVER} with ${PARAMETER}\n***"
        RET=1
        continue
    fi
    if [[ `grep -c "${EXPECTED}" ${SERVER_LOG}` != "1" ]]; then
        echo -e "\n***\n*** Failed. Expected 1 \"${EXPECTED}\" in the log with ${PARAMETER}\n***"
        RET=1
    fi
    curl -s -f -o /dev/null localhost:8000/v2/models/${MODEL}/ready || {
        echo -e "\n***\n*** Failed. ${MODEL} is not ready with ${PARAMETER}\n***"
        RET=1
    }
    kill ${SERVER_PID}; wait ${SERVER_PID}
done
set -e
rm -rf ${MODELDIR}

if [[ ${RET} -eq 0 ]]; then
    echo -e "\n***\n*** Test Passed\n***"
else
    echo -e "\n***\n*** Test FAILED\n***"
fi
exit ${RET}
