"""all-MiniLM-L6-v2 as an int8 ONNX graph, written from the same safetensors weights the fp32
path reads, so both embed into one space and nothing is downloaded but the `onnx` and
`onnxruntime` wheels that write and quantize it.

The graph is BERT in ONNX Runtime's fused operators (EmbedLayerNormalization, Attention,
SkipLayerNormalization, BiasGelu) — what its own transformer optimizer makes of an exported
BERT — followed by sentence-transformers' mean pooling over the attention mask and L2
normalisation, so it answers unit vectors. The token-type embedding is folded into the word
embeddings: every token Sluice embeds has token type 0. The attention projections and the
linear layers are then quantized to 8 bits — weights per output channel, activations with a
scale computed per run — except each feed-forward block's down-projection, whose input (the
GELU's output) has outliers a single activation scale cannot hold (quantized, it brought the
worst text's cosine to the fp32 embedding down from 0.996 to 0.991 on Cranfield, for ~10%
of the time), and the up-projections of layers 3 and 4, the two whose quantization cost the
shortest texts most (the empty text, two tokens, went from 0.9887 to 0.9936).

Weights are unsigned like the activations (u8×u8), not signed: on an x86 CPU without
AVX-512 VNNI, ONNX Runtime multiplies u8×s8 with AVX2's VPMADDUBSW, whose pairwise sums
saturate at 16 bits — measured on such a CPU, the worst text fell to 0.981 and 19 of
Cranfield's 1,400 under 0.99, where the host it was first measured on had none. u8×u8
products are widened before they are summed, so every CPU computes the same integers (~20%
slower than u8×s8 on AVX2).

    python onnx_int8.py MODEL_DIR OUT.onnx [--fp32 FP32.onnx]

MODEL_DIR holds config.json and model.safetensors; --fp32 also writes the unquantized graph
(for measuring what quantization costs, not shipped).
"""

import argparse
import json
import os
import struct
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

DTYPES = {"F32": np.float32, "I64": np.int64}
# The layers whose up-projection stays fp32: quantized, they cost the shortest texts most.
FP32_UP_PROJECTION_LAYERS = (3, 4)


def read_safetensors(path):
    """The tensors of a safetensors file: an 8-byte header length, a JSON header, the data."""
    with open(path, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data = f.read()
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        start, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(data[start:end], dtype=DTYPES[entry["dtype"]]).reshape(entry["shape"])
    return tensors


def build(weights, config):
    hidden = config["hidden_size"]
    heads = config["num_attention_heads"]
    eps = float(config["layer_norm_eps"])
    initializers = []
    nodes = []

    def constant(name, array):
        initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def w(name):
        return weights[name].astype(np.float32)

    ms = "com.microsoft"

    def linear(source, output, weights_name, prefix, name=None):
        """A PyTorch Linear's product (its bias joins the next node): x · Wᵀ."""
        weight = constant(f"{prefix}_weight", w(weights_name + ".weight").T)
        nodes.append(helper.make_node("MatMul", [source, weight], [output], **({"name": name} if name else {})))

    def skip_norm(source, residual, block, prefix, output):
        """LayerNorm(source + residual + the preceding Linear's bias), in one fused node."""
        nodes.append(
            helper.make_node(
                "SkipLayerNormalization",
                [
                    source,
                    residual,
                    constant(f"{prefix}_gamma", w(block + ".LayerNorm.weight")),
                    constant(f"{prefix}_beta", w(block + ".LayerNorm.bias")),
                    constant(f"{source}_bias", w(block + ".dense.bias")),
                ],
                [output],
                domain=ms,
                epsilon=eps,
            )
        )
    word = w("embeddings.word_embeddings.weight") + w("embeddings.token_type_embeddings.weight")[0]
    nodes.append(
        helper.make_node(
            "EmbedLayerNormalization",
            [
                "input_ids",
                "",
                constant("word_embeddings", word),
                constant("position_embeddings", w("embeddings.position_embeddings.weight")),
                "",
                constant("embeddings_gamma", w("embeddings.LayerNorm.weight")),
                constant("embeddings_beta", w("embeddings.LayerNorm.bias")),
                "attention_mask",
            ],
            ["layer_0_input", "mask_index"],
            domain=ms,
            epsilon=eps,
        )
    )
    current = "layer_0_input"
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        qkv_weight = np.concatenate(
            [w(p + f"attention.self.{part}.weight").T for part in ("query", "key", "value")], axis=1
        )
        qkv_bias = np.concatenate([w(p + f"attention.self.{part}.bias") for part in ("query", "key", "value")])
        nodes.append(
            helper.make_node(
                "Attention",
                [current, constant(f"l{i}_qkv_weight", qkv_weight), constant(f"l{i}_qkv_bias", qkv_bias), "mask_index"],
                [f"l{i}_attention"],
                domain=ms,
                num_heads=heads,
            )
        )
        linear(f"l{i}_attention", f"l{i}_attention_out", p + "attention.output.dense", f"l{i}_attention_out")
        skip_norm(f"l{i}_attention_out", current, p + "attention.output", f"l{i}_attention", f"l{i}_attended")
        linear(
            f"l{i}_attended", f"l{i}_intermediate", p + "intermediate.dense", f"l{i}_intermediate",
            name=f"l{i}_up_projection",
        )
        nodes.append(
            helper.make_node(
                "BiasGelu",
                [f"l{i}_intermediate", constant(f"l{i}_intermediate_bias", w(p + "intermediate.dense.bias"))],
                [f"l{i}_activated"],
                domain=ms,
            )
        )
        linear(f"l{i}_activated", f"l{i}_output", p + "output.dense", f"l{i}_output", name=f"l{i}_down_projection")
        skip_norm(f"l{i}_output", f"l{i}_attended", p + "output", f"l{i}_output", f"layer_{i + 1}_input")
        current = f"layer_{i + 1}_input"

    # Mean over the real tokens, then unit length — as sentence-transformers pools.
    nodes += [
        helper.make_node("Cast", ["attention_mask"], ["mask_float"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask_float", constant("axis_2", np.array([2], np.int64))], ["mask_3d"]),
        helper.make_node("Mul", [current, "mask_3d"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", constant("axis_1", np.array([1], np.int64))], ["summed"], keepdims=0),
        helper.make_node("ReduceSum", ["mask_3d", "axis_1"], ["counts"], keepdims=0),
        helper.make_node("Max", ["counts", constant("least_count", np.array(1e-9, np.float32))], ["counts_floor"]),
        helper.make_node("Div", ["summed", "counts_floor"], ["pooled"]),
        helper.make_node("ReduceL2", ["pooled", "axis_1"], ["norms"], keepdims=1),
        helper.make_node("Max", ["norms", constant("least_norm", np.array(1e-12, np.float32))], ["norms_floor"]),
        helper.make_node("Div", ["pooled", "norms_floor"], ["embeddings"]),
    ]
    graph = helper.make_graph(
        nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT32, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT32, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", hidden])],
        initializers,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(ms, 1)],
        producer_name="sluice",
    )
    model.ir_version = 8
    return model


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir")
    parser.add_argument("out")
    parser.add_argument("--fp32", help="also write the unquantized graph here")
    args = parser.parse_args()
    with open(os.path.join(args.model_dir, "config.json")) as f:
        config = json.load(f)
    model = build(read_safetensors(os.path.join(args.model_dir, "model.safetensors")), config)
    onnx.checker.check_model(model)
    with tempfile.TemporaryDirectory() as scratch:
        fp32 = args.fp32 or os.path.join(scratch, "fp32.onnx")
        onnx.save(model, fp32)
        # Matrix products and attention projections in 8 bits; the embeddings, layer norms and
        # pooling stay fp32, where quantization would cost accuracy and save no time.
        quantize_dynamic(
            fp32,
            args.out,
            weight_type=QuantType.QUInt8,
            op_types_to_quantize=["MatMul", "Attention"],
            per_channel=True,
            nodes_to_exclude=[f"l{i}_down_projection" for i in range(config["num_hidden_layers"])]
            + [f"l{i}_up_projection" for i in FP32_UP_PROJECTION_LAYERS],
            # Shape inference does not see through the fused operators' outputs; all are fp32.
            extra_options={"DefaultTensorType": TensorProto.FLOAT},
        )
    print(f"wrote {args.out} ({os.path.getsize(args.out) / 1e6:.1f} MB)", file=sys.stderr)


if __name__ == "__main__":
    main()
