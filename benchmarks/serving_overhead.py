"""What serving through Triton costs over calling the model in-process, measured side by side.

For each model of a repository: eager PyTorch (the baseline), the reloaded TorchScript file, and Triton over
HTTP and over gRPC, each on the model's first reference case, interleaved round by round so that machine
noise hits all of them alike. Prints medians and the ratio to eager.

    python benchmarks/serving_overhead.py [--repository model_repository] [--rounds 30] [--target local]
    nox -s bench
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

from tritonpt import client, reference, repository, server, spec, zoo


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _measure(instance: server.Server, model: repository.ModelDir, *, rounds: int, warmup: int) -> None:
    """Time eager, TorchScript, HTTP and gRPC on the model's first reference case, interleaved; print a row."""
    ref = reference.load(model)
    case = ref.cases[0]
    tensors = [torch.from_numpy(a.copy()) for a in case.inputs]
    feeds = dict(zip([i.name for i in ref.inputs], case.inputs, strict=True))
    outputs = [o.name for o in ref.outputs]
    scripted = torch.jit.load(str(model.model_file())).eval()
    # The baseline is the eager nn.Module for built-in models (rebuilt with the export's seed); a repository
    # holds only TorchScript for other models, so there the TorchScript file is the baseline.
    factory = zoo.BUILTIN.get(model.name)
    module = (
        spec.coerce(zoo.build(factory, ref.provenance.seed), name=model.name).module.eval()
        if factory
        else scripted
    )

    def in_process(callable_module: torch.nn.Module) -> Callable[[], object]:
        def call() -> object:
            with torch.inference_mode():
                return callable_module(*tensors)

        return call

    def served(protocol: client.Protocol) -> Callable[[], object]:
        return lambda: client.infer(instance.endpoints, protocol, model.name, feeds, outputs)

    runs = {
        "eager": in_process(module),
        "torchscript": in_process(scripted),
        "http": served("http"),
        "grpc": served("grpc"),
    }
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for round_index in range(warmup + rounds):
        for name, call in runs.items():
            seconds = _timed(call)
            if round_index >= warmup:
                samples[name].append(seconds)
    median = {name: statistics.median(values) * 1e3 for name, values in samples.items()}
    base = median["eager"]
    cells = [f"{median[n]:6.2f} ({median[n] / base:4.2f}x)" for n in ("torchscript", "http", "grpc")]
    baseline = "" if factory else "  (baseline: TorchScript; no eager module for this model)"
    print(f"{model.name:<14} {case.id:<8} {base:9.2f} " + " ".join(f"{c:>15}" for c in cells) + baseline)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repository", type=Path, default=repository.DEFAULT_REPOSITORY)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--target", default="local", choices=("local", "url", "container"))
    parser.add_argument("--url", default=None)
    parser.add_argument("--image", default=None)
    options = parser.parse_args(argv)

    models = repository.models(options.repository)
    if not models:
        print(f"error: no models in {options.repository}; run `invoke export` first", file=sys.stderr)
        return 1
    instance = server.create(
        options.target, repository=options.repository, url=options.url, image=options.image,
        log_path=Path("reports/bench-tritonserver.log"),
    )  # fmt: skip
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; {options.rounds} rounds after {options.warmup} warm-up"
    )
    header = f"{'model':<14} {'case':<8} {'eager ms':>9} {'torchscript':>15} {'http':>15} {'grpc':>15}"
    print(header)
    print("-" * len(header))
    with instance:
        instance.wait_models_ready([m.name for m in models])
        for model in models:
            _measure(instance, model, rounds=options.rounds, warmup=options.warmup)
    return 0


if __name__ == "__main__":
    sys.exit(main())
