"""The model run eagerly: on its example inputs, twice more to prove it deterministic, and on seeded reference
cases (batch 1, the largest batch, another length on each variable axis) whose outputs parity compares with."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from tritonpt import dtypes, reference, spec
from tritonpt.errors import HINT, ExportError, SpecError, first_line
from tritonpt.export.outputs import Structure, describe
from tritonpt.parity import compare
from tritonpt.spec import ModelSpec


def sentence(text: str) -> str:
    """``text`` ending in exactly one full stop, to be followed by another sentence."""
    return text.rstrip().rstrip(".") + "."


class Eager:
    """One model in eval mode, called as its example inputs say (by position, or with keywords); every result is
    flattened by the structure of the first (:class:`~tritonpt.export.outputs.Structure`), which must not change."""

    def __init__(self, model_spec: ModelSpec) -> None:
        self.spec = model_spec
        self.module = model_spec.module.eval()
        first = self._call(model_spec.example_inputs)
        self.structure = self._structure(first)
        self.reshaped = tuple(model_spec.batching and t.dim() == 1 for t in self.structure.pick(first))
        """Per output: one value a sample, which Triton serves as [batch, 1] (:func:`as_served`)."""

    def _call(self, inputs: Sequence[torch.Tensor]) -> object:
        """forward() on copies of ``inputs``: a model that changes its inputs in place (``x.add_(1)``) must leave
        the example inputs and a case's recorded inputs as they were, or the reference would hold outputs of
        other inputs than it records."""
        inputs = [t.clone() for t in inputs]
        try:
            with torch.inference_mode():
                if self.spec.keyword_inputs:
                    return self.module(**dict(zip(self.spec.resolved_input_names(), inputs, strict=True)))
                return self.module(*inputs)
        except Exception as exc:  # the user's forward(): whatever it raises is the user's to fix
            shapes = ", ".join(f"{list(t.shape)} {t.dtype}" for t in inputs)
            msg = (
                f"Model {self.spec.name!r}: forward() failed on inputs {shapes}: {type(exc).__name__}: "
                f"{sentence(first_line(exc))} {HINT} call the model on its example inputs yourself to see the "
                "traceback (or rerun with --debug)."
            )
            raise ExportError(msg) from exc

    def _structure(self, result: object) -> Structure:
        structure = Structure.of(self.spec.name, result)
        for path, tensor in zip(structure.paths, structure.pick(result), strict=True):
            _servable(
                self.spec.name,
                describe(path) if structure.keyed else f"output {path[-1] if path else 0}",
                tensor,
            )
        return structure

    def outputs(self, inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """The model's tensors on ``inputs``, in the structure's order, as Triton serves them."""
        result = self._call(inputs)
        found = Structure.of(self.spec.name, result)
        if found.paths != self.structure.paths:
            shapes = ", ".join(f"{list(t.shape)}" for t in inputs)
            msg = (
                f"Model {self.spec.name!r}: what forward() returns changes with its inputs: on inputs of shapes "
                f"{shapes}, {self.structure.differences(found)} (against the example inputs). Triton serves a "
                f"fixed set of outputs. {HINT} return the same keys for every input (a data-dependent structure, "
                "such as a detection model's list of per-image results, cannot be one config's outputs)."
            )
            raise SpecError(msg)
        return tuple(as_served(t, batching=self.spec.batching) for t in self.structure.pick(result))

    def check_deterministic(self) -> None:
        """Two eager runs on equal copies of the example inputs must agree, or no reference can hold when served."""
        first, second = (self.outputs(self.spec.example_inputs) for _ in range(2))
        names = self.structure.names()
        differences = []
        for name, a, b in zip(names, first, second, strict=True):
            data_type = dtypes.from_torch(a.dtype).config
            result = compare(name, b.numpy(), a.numpy(), spec.tolerance_for(data_type))
            if not result.ok:
                differences.append(result.describe())
        if differences:
            msg = (
                f"Model {self.spec.name!r}: forward() is not deterministic: two eager runs on the same example "
                f"inputs differ ({'; '.join(differences)}). Triton would answer the same request with other "
                f"numbers each time, and no reference output can hold. {HINT} take the randomness out of "
                "forward(): dropout must follow self.training (nn.Dropout, or F.dropout(x, p, "
                "training=self.training)), no torch.rand/randn/bernoulli on the data path, and no state that "
                "changes from one call to the next."
            )
            raise ExportError(msg)

    def reference_cases(self, seed: int) -> list[reference.Case]:
        """Seeded inputs for each case and the eager outputs for them."""
        model_spec = self.spec
        generator = torch.Generator().manual_seed(seed)
        plans: list[tuple[str, int, Mapping[int, Mapping[int, int]]]] = []
        if model_spec.batching:
            plans += [(f"b{b}", b, {}) for b in model_spec.reference_batch_sizes()]
        else:
            plans.append(("full", 0, {}))
        if model_spec.dynamic_axes:
            other = {
                index: {axis: other_length(model_spec.example_inputs[index].shape[axis]) for axis in axes}
                for index, axes in model_spec.dynamic_axes.items()
            }
            largest = max(model_spec.reference_batch_sizes(), default=0)
            label = "x".join(str(n) for axes in other.values() for n in axes.values())
            plans.append((f"b{largest}-len{label}" if largest else f"len{label}", largest, other))
        cases = []
        for case_id, batch, lengths in plans:
            inputs = []
            for index, template in enumerate(model_spec.example_inputs):
                shape = list(template.shape)
                if model_spec.batching:
                    shape[0] = batch
                for axis, length in lengths.get(index, {}).items():
                    shape[axis] = length
                inputs.append(_random_like(template, shape, generator))
            outputs = self.outputs(inputs)
            cases.append(
                reference.Case(
                    id=case_id,
                    batch_size=batch,
                    inputs=tuple(t.numpy() for t in inputs),
                    outputs=tuple(t.detach().contiguous().numpy() for t in outputs),
                )
            )
        return cases

    def output_dims(
        self, example: Sequence[torch.Tensor], cases: Sequence[reference.Case]
    ) -> list[list[int]]:
        """Each output's config dims; an axis whose length changes between cases becomes -1."""
        dims = []
        for j, (name, tensor) in enumerate(zip(self.structure.names(), example, strict=True)):
            shapes = [tuple(tensor.shape)] + [case.outputs[j].shape for case in cases]
            if len({len(s) for s in shapes}) != 1:
                msg = f"Model {self.spec.name!r}: output {name} changes rank between inputs ({shapes}); Triton needs a fixed rank."
                raise ExportError(msg)
            if self.spec.batching:
                for case in cases:
                    if case.outputs[j].shape[0] != case.batch_size:
                        msg = (
                            f"Model {self.spec.name!r}: with batch size {case.batch_size}, output {name} has shape "
                            f"{list(case.outputs[j].shape)}; its first axis must be the batch axis. Export with "
                            "max_batch_size 0 if the model does not batch along axis 0."
                        )
                        raise ExportError(msg)
            full = [
                -1 if len({s[axis] for s in shapes}) > 1 else shapes[0][axis]
                for axis in range(len(shapes[0]))
            ]
            dims.append(full[1:] if self.spec.batching else full)
        return dims


def as_served(tensor: torch.Tensor, *, batching: bool) -> torch.Tensor:
    """A model's output as Triton serves it. One value a sample ([batch] from the model) leaves no dims after the
    batch axis, which Triton refuses (`must specify 'dims'`, rule C022), so the config declares dims [ 1 ] with
    reshape { shape: [ ] }, and Triton's core answers [batch, 1]: the reference records that."""
    return tensor.unsqueeze(-1) if batching and tensor.dim() == 1 else tensor


def _servable(name: str, what: str, tensor: torch.Tensor) -> None:
    """One output tensor as the backend can return it: not 0-d, a served data type, dense, on the CPU."""
    if tensor.dim() == 0:
        msg = (
            f"Model {name!r}: {what} is a 0-d scalar; the pytorch backend rejects scalar outputs (`output ... is a "
            "scalar which is not supported`). Return it with shape [1] (e.g. `.reshape(1)`) or per sample."
        )
        raise SpecError(msg)
    try:
        dtypes.from_torch(tensor.dtype)
    except ValueError as exc:
        msg = f"Model {name!r}, {what}: {exc}"
        raise SpecError(msg) from None
    if tensor.device.type != "cpu" or tensor.layout != torch.strided:
        msg = (
            f"Model {name!r}: {what} is a {str(tensor.layout).removeprefix('torch.')} tensor on device "
            f"{tensor.device}; export runs the model on the CPU and Triton's pytorch backend returns dense tensors. "
            f"{HINT} return it as it is computed from the inputs, on their device (no `.to(...)` to another "
            "device, no `.to_sparse()`)."
        )
        raise SpecError(msg)


def _random_like(template: torch.Tensor, shape: Sequence[int], generator: torch.Generator) -> torch.Tensor:
    """Seeded values of the template's dtype; integers stay within the template's observed range."""
    if template.dtype == torch.bool:
        return torch.randint(0, 2, tuple(shape), generator=generator).bool()
    if template.dtype.is_floating_point:
        return torch.randn(tuple(shape), generator=generator).to(template.dtype)
    low = int(template.min()) if template.numel() else 0
    high = int(template.max()) + 1 if template.numel() else 1
    return torch.randint(low, max(high, low + 1), tuple(shape), generator=generator, dtype=template.dtype)


def other_length(length: int) -> int:
    """A second length for a variable axis, different from the example's."""
    return length // 2 if length > 2 else length + 3
