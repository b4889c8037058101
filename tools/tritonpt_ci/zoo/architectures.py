"""Public architectures exactly as their libraries build them, with random weights: the zoo's rows.

Each entry is a zero-argument factory returning a :class:`~tritonpt.spec.ModelSpec`, the same contract as
``invoke export --model MODULE:ATTR``; nothing is wrapped by hand. torchvision models take 64x64 images (video:
4 frames of 64x64) so that the zoo stays fast on two cores; ``transformers`` models are tiny configs (2 layers,
hidden 64, a 1000-token vocabulary) called with ``input_ids`` and ``attention_mask`` by keyword, with a dynamic
sequence axis. Decoders are built with ``use_cache=False``: a key/value cache is state between calls, which one
forward pass does not serve. Nothing is downloaded: no weights, no tokenizer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import torch

from tritonpt.spec import ModelSpec

IMAGE = 64
VOCAB = 1000
TEXT_BATCH, TEXT_LENGTH = 2, 8


@dataclass(frozen=True, kw_only=True)
class Architecture:
    name: str  # the model's folder in the zoo's repository
    library: str  # "torchvision" or "transformers"
    family: str  # classification, segmentation, video, detection, encoder, decoder, encoder-decoder, vision
    build: Callable[[], ModelSpec]
    smoke: bool = False  # in `nox -s zoo-smoke`


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """An architecture export refuses, on purpose: the words its refusal must hold, and why it cannot be served."""

    says: str  # in export's reason; a refusal for another reason is a finding
    why: str


EXPECTED_REFUSALS: dict[str, Refusal] = {
    "fasterrcnn_mobilenet_v3_large_320_fpn": Refusal(
        says="what forward() returns changes with its inputs",
        why="a detection model returns a list of per-image results whose length follows the detections found, "
        "and Triton serves a fixed set of outputs",
    ),
}
"""Every architecture of the zoo that export is expected to refuse, each with its reason: the one place that says
so. Any other refusal (an architecture that served and no longer does) fails the zoo, whatever its ratio."""


def _torchvision(function: str, **options: Any) -> torch.nn.Module:  # noqa: ANN401 - torchvision's own options
    import torchvision  # noqa: PLC0415 - only the zoo needs it

    for module in (
        torchvision.models,
        torchvision.models.segmentation,
        torchvision.models.video,
        torchvision.models.detection,
    ):
        if hasattr(module, function):
            return getattr(module, function)(weights=None, **options)  # type: ignore[no-any-return]
    msg = f"torchvision {torchvision.__version__} has no model {function!r}"
    raise LookupError(msg)


def _images(name: str, function: str, *, batch: int = 2, size: int = IMAGE, **options: Any) -> ModelSpec:  # noqa: ANN401
    return ModelSpec(
        name=name,
        module=_torchvision(function, **options),
        example_inputs=(torch.randn(batch, 3, size, size),),
        max_batch_size=4,
    )


def _video(name: str, function: str) -> ModelSpec:
    return ModelSpec(
        name=name,
        module=_torchvision(function),
        example_inputs=(torch.randn(1, 3, 4, IMAGE, IMAGE),),
        max_batch_size=2,
    )


def _transformers(model_class: str, config_class: str, **config: Any) -> torch.nn.Module:  # noqa: ANN401
    import transformers  # noqa: PLC0415 - only the zoo needs it (nox -s zoo installs it)

    made = getattr(transformers, config_class)(**config)
    return getattr(transformers, model_class)(made)  # type: ignore[no-any-return]


def _tokens(*names: str, batch: int = TEXT_BATCH, length: int = TEXT_LENGTH) -> dict[str, torch.Tensor]:
    """Token ids (and a mask of ones, and token types of zeros) as a tokenizer returns them."""
    ids = torch.randint(3, VOCAB, (batch, length))
    made = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
    return {n: made[n] if n in made else torch.randint(3, VOCAB, (batch, max(2, length - 2))) for n in names}


def _text(name: str, module: torch.nn.Module, inputs: Mapping[str, torch.Tensor]) -> ModelSpec:
    return ModelSpec(
        name=name,
        module=module,
        example_inputs=cast(Any, inputs),  # a mapping: coerce names and orders it
        dynamic_axes=cast(Any, dict.fromkeys(inputs, (1,))),  # by name: every sequence axis varies
        max_batch_size=4,
    )


def _pixels(name: str, module: torch.nn.Module, size: int) -> ModelSpec:
    return ModelSpec(
        name=name,
        module=module,
        example_inputs=cast(Any, {"pixel_values": torch.randn(2, 3, size, size)}),
        max_batch_size=4,
    )


TINY = {
    "vocab_size": VOCAB,
    "hidden_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "intermediate_size": 128,
    "max_position_embeddings": 128,
}
LLAMA_LIKE = {**TINY, "num_attention_heads": 4, "num_key_value_heads": 2, "use_cache": False}
GPT2 = {"vocab_size": VOCAB, "n_positions": 128, "n_embd": 64, "n_layer": 2, "n_head": 2, "use_cache": False}
VIT = {"image_size": 32, "patch_size": 8, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
       "intermediate_size": 128}  # fmt: skip
CLIP_VISION = {**VIT, "num_attention_heads": 2}
CLIP_TEXT = {**TINY, "max_position_embeddings": 77}
T5 = {"vocab_size": VOCAB, "d_model": 64, "d_kv": 32, "d_ff": 128, "num_layers": 2, "num_decoder_layers": 2,
      "num_heads": 2, "decoder_start_token_id": 0, "use_cache": False}  # fmt: skip
BART = {"vocab_size": VOCAB, "d_model": 64, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 2,
        "decoder_attention_heads": 2, "encoder_ffn_dim": 128, "decoder_ffn_dim": 128,
        "max_position_embeddings": 128, "use_cache": False}  # fmt: skip
OPT = {"vocab_size": VOCAB, "hidden_size": 64, "num_hidden_layers": 2, "ffn_dim": 128, "num_attention_heads": 2,
       "max_position_embeddings": 128, "word_embed_proj_dim": 64, "use_cache": False}  # fmt: skip
TEXT = ("input_ids", "attention_mask")


def _classification(function: str, *, smoke: bool = False, **options: Any) -> Architecture:  # noqa: ANN401
    return Architecture(
        name=function,
        library="torchvision",
        family="classification",
        build=lambda: _images(function, function, **options),
        smoke=smoke,
    )


def _hf(  # noqa: PLR0917 - one row of the table, read left to right
    name: str,
    family: str,
    model: str,
    config: str,
    settings: Mapping[str, Any],
    inputs: tuple[str, ...] = TEXT,
    *,
    smoke: bool = False,
) -> Architecture:
    return Architecture(
        name=name,
        library="transformers",
        family=family,
        build=lambda: _text(name, _transformers(model, config, **settings), _tokens(*inputs)),
        smoke=smoke,
    )


def _hf_vision(name: str, model: str, config: str, settings: Mapping[str, Any], size: int) -> Architecture:
    return Architecture(
        name=name,
        library="transformers",
        family="vision",
        build=lambda: _pixels(name, _transformers(model, config, **settings), size),
    )


def _clip() -> ModelSpec:
    module = _transformers(
        "CLIPModel", "CLIPConfig", text_config=CLIP_TEXT, vision_config=CLIP_VISION, projection_dim=32
    )
    inputs = {**_tokens(*TEXT), "pixel_values": torch.randn(TEXT_BATCH, 3, 32, 32)}
    return ModelSpec(
        name="clip",
        module=module,
        example_inputs=cast(Any, inputs),
        dynamic_axes=cast(Any, {"input_ids": (1,), "attention_mask": (1,)}),
        max_batch_size=4,
    )


ARCHITECTURES: tuple[Architecture, ...] = (
    # torchvision: classification
    _classification("resnet18"),
    _classification("mobilenet_v3_small"),
    _classification("efficientnet_b0"),
    _classification("squeezenet1_0", smoke=True),
    _classification("shufflenet_v2_x0_5"),
    _classification("mnasnet0_5"),
    _classification("regnet_y_400mf"),
    _classification("convnext_tiny"),
    _classification("swin_t"),
    _classification("densenet121"),
    _classification("googlenet"),
    _classification("alexnet"),
    Architecture(
        name="vit_b_16",
        library="torchvision",
        family="classification",
        build=lambda: _images("vit_b_16", "vit_b_16", image_size=IMAGE),
    ),
    # torchvision: segmentation (an OrderedDict out)
    Architecture(
        name="lraspp_mobilenet_v3_large",
        library="torchvision",
        family="segmentation",
        build=lambda: _images(
            "lraspp_mobilenet_v3_large", "lraspp_mobilenet_v3_large", weights_backbone=None
        ),
        smoke=True,
    ),
    Architecture(
        name="deeplabv3_mobilenet_v3_large",
        library="torchvision",
        family="segmentation",
        build=lambda: _images(
            "deeplabv3_mobilenet_v3_large",
            "deeplabv3_mobilenet_v3_large",
            weights_backbone=None,
            aux_loss=True,
        ),
    ),
    Architecture(
        name="fcn_resnet50",
        library="torchvision",
        family="segmentation",
        build=lambda: _images("fcn_resnet50", "fcn_resnet50", weights_backbone=None),
    ),
    # torchvision: video
    Architecture(
        name="r3d_18", library="torchvision", family="video", build=lambda: _video("r3d_18", "r3d_18")
    ),
    Architecture(
        name="mc3_18", library="torchvision", family="video", build=lambda: _video("mc3_18", "mc3_18")
    ),
    Architecture(
        name="r2plus1d_18",
        library="torchvision",
        family="video",
        build=lambda: _video("r2plus1d_18", "r2plus1d_18"),
    ),
    # torchvision: detection (a list of per-image dicts whose length varies)
    Architecture(
        name="fasterrcnn_mobilenet_v3_large_320_fpn",
        library="torchvision",
        family="detection",
        build=lambda: _images(
            "fasterrcnn_mobilenet_v3_large_320_fpn",
            "fasterrcnn_mobilenet_v3_large_320_fpn",
            size=128,
            weights_backbone=None,
        ),
    ),
    # transformers: encoders
    _hf(
        "bert", "encoder", "BertModel", "BertConfig", TINY, ("input_ids", "attention_mask", "token_type_ids")
    ),
    _hf(
        "bert_for_sequence_classification",
        "encoder",
        "BertForSequenceClassification",
        "BertConfig",
        TINY,
        smoke=True,
    ),
    _hf(
        "distilbert_for_sequence_classification",
        "encoder",
        "DistilBertForSequenceClassification",
        "DistilBertConfig",
        {
            "vocab_size": VOCAB,
            "dim": 64,
            "n_layers": 2,
            "n_heads": 2,
            "hidden_dim": 128,
            "max_position_embeddings": 128,
        },
    ),
    _hf("roberta", "encoder", "RobertaModel", "RobertaConfig", TINY),
    _hf("albert", "encoder", "AlbertModel", "AlbertConfig", {**TINY, "embedding_size": 32}),
    _hf("electra", "encoder", "ElectraModel", "ElectraConfig", {**TINY, "embedding_size": 32}),
    _hf("deberta_v2", "encoder", "DebertaV2Model", "DebertaV2Config", TINY),
    # transformers: decoders
    _hf("gpt2_lm_head", "decoder", "GPT2LMHeadModel", "GPT2Config", GPT2, smoke=True),
    _hf("llama_for_causal_lm", "decoder", "LlamaForCausalLM", "LlamaConfig", LLAMA_LIKE),
    _hf("mistral_for_causal_lm", "decoder", "MistralForCausalLM", "MistralConfig", LLAMA_LIKE),
    _hf("qwen2_for_causal_lm", "decoder", "Qwen2ForCausalLM", "Qwen2Config", LLAMA_LIKE),
    _hf("opt_for_causal_lm", "decoder", "OPTForCausalLM", "OPTConfig", OPT),
    _hf(
        "gpt_neox_for_causal_lm",
        "decoder",
        "GPTNeoXForCausalLM",
        "GPTNeoXConfig",
        {**TINY, "use_cache": False},
    ),
    # transformers: encoder-decoders (decoder_input_ids as well)
    _hf(
        "t5_for_conditional_generation",
        "encoder-decoder",
        "T5ForConditionalGeneration",
        "T5Config",
        T5,
        ("input_ids", "attention_mask", "decoder_input_ids"),
    ),
    _hf(
        "bart",
        "encoder-decoder",
        "BartModel",
        "BartConfig",
        BART,
        ("input_ids", "attention_mask", "decoder_input_ids"),
    ),
    # transformers: vision, and text with vision
    _hf_vision("vit", "ViTModel", "ViTConfig", VIT, 32),
    _hf_vision(
        "vit_for_image_classification",
        "ViTForImageClassification",
        "ViTConfig",
        {**VIT, "num_labels": 10},
        32,
    ),
    _hf_vision("deit", "DeiTModel", "DeiTConfig", VIT, 32),
    _hf_vision(
        "convnext",
        "ConvNextModel",
        "ConvNextConfig",
        {"hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 1, 1], "image_size": 64},
        64,
    ),
    _hf_vision(
        "swin",
        "SwinModel",
        "SwinConfig",
        {
            "image_size": 64,
            "patch_size": 4,
            "embed_dim": 16,
            "depths": [1, 1, 1],
            "num_heads": [1, 2, 4],
            "window_size": 4,
        },
        64,
    ),
    _hf_vision("clip_vision", "CLIPVisionModel", "CLIPVisionConfig", CLIP_VISION, 32),
    Architecture(name="clip", library="transformers", family="vision and text", build=_clip),
)
