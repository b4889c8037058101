"""The admin key's way onto requests (never into words), the upload's refusals before any request, and the load /
unload cycles' verdict."""

from __future__ import annotations

from pathlib import Path

import pytest
from tritonclient._request import Request

from tritonpt import client, repository
from tritonpt.server import upload
from tritonpt_ci import cycles


def test_the_admin_key_goes_on_every_request_of_both_protocols_and_never_into_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(client.ADMIN_KEY_ENV, "k-123")
    monkeypatch.delenv(client.ADMIN_HEADER_ENV, raising=False)
    endpoints = client.Endpoints(
        http="127.0.0.1:1", grpc="127.0.0.1:2", metrics_url="http://127.0.0.1:3/metrics"
    )
    with client.http(endpoints) as http:
        request = Request({})
        http._call_plugin(request)
        assert request.headers == {"admin-key": "k-123"}
        assert "k-123" not in repr(http._plugin)
    monkeypatch.setenv(client.ADMIN_HEADER_ENV, "x-ops")
    with client.grpc(endpoints) as grpc:
        request = Request({})
        grpc._call_plugin(request)
        assert request.headers == {"triton-grpc-protocol-x-ops": "k-123"}
    monkeypatch.delenv(client.ADMIN_KEY_ENV)
    assert client.admin_header() is None
    with client.http(endpoints) as http:
        request = Request({})
        http._call_plugin(request)
        assert request.headers == {}


def test_an_upload_carries_the_version_folders_and_refuses_what_it_cannot_send(
    repository_copy: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = repository_copy("multi_io")  # type: ignore[operator]
    model = repository.ModelDir(root=folder / "multi_io")
    made = upload.Upload.of(model)
    assert set(made.files) == {
        "file:1/model.pt",
        "file:warmup/context",
        "file:warmup/features",
    }  # not the references
    assert '"platform": "pytorch_libtorch"' in made.request_config(pt2_backend="pt2")
    monkeypatch.setattr(upload, "MAX_BYTES", made.size - 1)
    with pytest.raises(
        upload.UploadError, match=r"Cannot upload multi_io: its files are .* MiB, and one load"
    ):
        upload.Upload.of(model)
    empty = repository.ModelDir(root=tmp_path / "empty")
    (empty.root).mkdir()
    empty.config.write_text('name: "empty"\nplatform: "pytorch_libtorch"\n', encoding="utf-8")
    with pytest.raises(upload.UploadError, match="has no version folder"):
        upload.Upload.of(empty)


def _result(rss: list[float], *, judged: bool = True) -> cycles.Result:
    made = cycles.Result(models=["m"], judged=judged)
    made.cycles = [cycles.Cycle(index=i, rss_mib=v, seconds=0.1) for i, v in enumerate(rss, start=1)]
    return made


def test_the_growth_is_fitted_after_the_warm_up_and_one_swing_does_not_tilt_it() -> None:
    warm = [500.0 + 30 * i for i in range(cycles.WARMUP)]  # the first-time growth, left out
    flat = [800.0] * 20
    flat[7] = 700.0  # the allocator returned an arena once
    result = _result(warm + flat)
    assert result.slope_mib == 0.0
    assert result.ok
    leaking = _result(warm + [800.0 + 20 * i for i in range(20)])  # #5841's rate
    assert leaking.slope_mib == pytest.approx(20.0)
    assert not leaking.ok
    assert "EXCEEDED" in leaking.verdict()


def test_a_smoke_reports_the_growth_without_judging_it() -> None:
    short = _result([500.0, 900.0, 1300.0], judged=False)
    assert short.slope_mib is None
    assert short.ok
    assert "not judged" in short.verdict()
