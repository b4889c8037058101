"""The server's statistics after the matrix's requests: each model's split of a request (queue, compute input,
infer, output) must lie within the requests themselves. It names the PT2 build by what it does: pytorch_backend
r26.05's stock PT2 path reports its timestamps in the wrong order (docs/upstream/pt2-statistics.md), our patched
build (0005) in order. It sends a request of its own first (the model's first reference case), so that it judges
a model whatever else a selection ran, and holds that the server counted it."""

from __future__ import annotations

from tritonpt import assertions, client
from tritonpt.reporting.report import Report
from tritonpt.server.base import Server
from tritonpt.versions import VERSIONS

from .models import Model

STOCK_SAYS = (
    "statistics out of order: the stock r26.05 PT2 path (or a release with the same bug), "
    "docs/upstream/pt2-statistics.md"
)
PATCHED_SAYS = (
    f"statistics in order: the patched build (r26.05+{VERSIONS.pt2.build.patch_set}), or an upstream release "
    "that fixed them"
)


def test_statistics_are_in_order(triton: Server, model: Model, report: Report) -> None:
    case = model.reference.cases[0]
    before = assertions.settled_statistics(triton.endpoints, model.name, requests=model.counted(triton))
    client.infer(
        triton.endpoints, "http", model.name, dict(zip(model.input_names, case.inputs, strict=True)),
        model.output_names,
    )  # fmt: skip
    counted = assertions.settled_statistics(triton.endpoints, model.name, requests=before.requests + 1)
    assert counted.requests >= before.requests + 1, (
        f"{model.name}: the server did not count the request this test sent ({before.requests} before, "
        f"{counted.requests} after)"
    )
    found = client.split(triton.endpoints, model.name)
    parts = (
        f"{model.name}: {found.count} requests of {found.per_request_us(found.request_ns):.0f} us each, split "
        f"queue {found.per_request_us(found.queue_ns):.0f} / input {found.per_request_us(found.compute_input_ns):.0f}"
        f" / infer {found.per_request_us(found.compute_infer_ns):.0f} / output "
        f"{found.per_request_us(found.compute_output_ns):.0f} us"
    )
    if model.model_format == "torchscript":
        assert found.in_order, f"the TorchScript build's split does not fit its requests: {parts}"
        return
    report.environment["pt2 build, by its statistics"] = PATCHED_SAYS if found.in_order else STOCK_SAYS
    origin = triton.pt2_origin()
    if (
        origin is None
    ):  # a server at a URL, or one that serves torch_aoti itself: named above, its order not judged
        return
    if origin.patches:  # our patched build (instrumented or not); an instrumented stock one is stock
        assert found.in_order, f"pytorch_backend {origin.build} reports its statistics out of order: {parts}"
    else:
        assert not found.in_order, (
            f"pytorch_backend {origin.build} (stock) now reports its statistics in order ({parts}): the pinned "
            "PT2 sources fixed docs/upstream/pt2-statistics.md. Let the bench show PT2's split on stock too."
        )
