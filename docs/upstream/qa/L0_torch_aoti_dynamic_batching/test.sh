#!/bin/bash
# Offered to triton-inference-server/server under its BSD-3-Clause license, for qa/L0_torch_aoti_dynamic_batching/.
#
# Dynamic batching on the PT2 path: 8 concurrent batch-1 requests, merged by the batcher, must each get their own row back.
# Fixed by 0001-pt2-dynamic-batching.patch (tritonpt docs/upstream/); the models come from
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

rm -rf ${MODELDIR} && mkdir -p ${MODELDIR}
cp -r ${DATADIR}/qa_model_repository/torch_aoti_batch_float32 ${MODELDIR}/torch_aoti_batch_float32
rm -f *.log test_results.txt

run_server
if [[ "${SERVER_PID}" == "0" ]]; then
    echo -e "\n***\n*** Failed to start ${SERVER}\n***"
    cat ${SERVER_LOG}
    exit 1
fi

set +e
python3 ./dynamic_batching_test.py >> ${CLIENT_LOG} 2>&1
if [[ $? -ne 0 ]]; then
    cat ${CLIENT_LOG}
    RET=1
else
    check_test_results test_results.txt 1
    if [[ $? -ne 0 ]]; then
        cat ${CLIENT_LOG}
        RET=1
    fi
fi
set -e

kill ${SERVER_PID} || true
wait ${SERVER_PID} || true
rm -rf ${MODELDIR}

if [[ ${RET} -eq 0 ]]; then
    echo -e "\n***\n*** Test Passed\n***"
else
    echo -e "\n***\n*** Test FAILED\n***"
fi
exit ${RET}
