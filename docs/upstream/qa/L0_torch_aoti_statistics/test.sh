#!/bin/bash
# Offered to triton-inference-server/server under its BSD-3-Clause license, for qa/L0_torch_aoti_statistics/.
#
# The statistics extension's split of a request (queue, compute input, infer, output) must fit inside the requests.
# Fixed by 0005-pt2-statistics-order.patch (tritonpt docs/upstream/); the models come from
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
python3 ./statistics_test.py >> ${CLIENT_LOG} 2>&1
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
