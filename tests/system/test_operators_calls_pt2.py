"""tritonpt.operators.calls on AOTInductor packages compiled here: what a package needs of libtorch at run time, held to
what this torch's libtorch exports (the package loads in it). In the system tier: it takes the session's compiled
packages from the export cache (a unit test would compile them again in its private cache)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from tritonpt.operators import calls, registry


def test_a_package_needs_the_shims_its_library_imports_and_the_proxy_calls_of_its_json(
    exported_pt2: Path, tmp_path: Path
) -> None:
    """A real package of this torch: every shim its .so imports is one libtorch exports (it loads here); the
    proxy executor's targets come from the wrapper's JSON, as a package with an uncompiled operator writes it."""
    package = exported_pt2 / "multi_io_pt2" / "1" / "model.pt2"
    read = calls.of_file(package)
    assert read.format == "pt2"
    shims = set(read.names("shim"))
    assert shims, "a compiled package imports shim functions"
    here = registry.read_here()
    assert shims <= here.shims, sorted(shims - here.shims)
    with_proxy = tmp_path / "proxy.pt2"
    with zipfile.ZipFile(package) as original, zipfile.ZipFile(with_proxy, "w") as copy:
        for item in original.infolist():
            copy.writestr(item, original.read(item))
        folder = next(n for n in original.namelist() if n.endswith(".so")).rpartition("/")[0]
        node = {"name": "buf0", "node": {"target": "aten::linalg_polar", "inputs": [], "outputs": []}}
        copy.writestr(f"{folder}/extra.wrapper.json", json.dumps({"nodes": [node]}))
    proxies = [c for c in calls.of_file(with_proxy).calls if c.kind == "proxy"]
    assert [(c.name, c.refusal) for c in proxies] == [
        ("aten::linalg_polar", "Could not find schema for aten::linalg_polar.")
    ]
