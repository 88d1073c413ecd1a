"""PP-OCRv6's small line recognizer with its convolutions in int8, written from the fp32
model the rapidocr wheel ships, so nothing is downloaded but the `onnx`, `onnxruntime`,
`numpy` and `Pillow` wheels that write it.

Why: the convolutions are about three fifths of the recognizer's time and the recognizer most
of a page's, and a dense 150-dpi page took over 6 s on one core. Quantized, they run about
three times as fast; with the Latin-only classifier below, a real page is read 1.5 times as
fast on one core, as accurately — measured by `infra/local/bench-ocr` and
`infra/local/bench-ocr-languages`, which read with these and the wheel's model in one run
(BENCHMARKS.md).

How, each step for a reason:
- The graph is brought to opset 13 (per-channel quantization needs it; the wheel's is 11).
- ONNX Runtime's extended optimizations are applied first and saved (a convolution's bias
  add and batch norm folded in, GELU and the attention's matrix products fused — all operators
  of its CPU provider, no hardware layout), so quantization does not split what the runtime
  would have fused: quantized before fusing, the unfused bias adds and GELUs cost more than
  the int8 convolutions saved.
- Only plain convolutions are quantized (QDQ, weights per output channel, activations with
  scales fixed from calibration): the matrix products and the classifier stay fp32, which
  measured slower quantized (their quantize and dequantize steps outweigh them); the first
  convolutions, which the runtime fuses with their activations, stay fp32 as well.
- Weights are 7-bit (`reduce_range`): on an x86 CPU without AVX-512 VNNI, ONNX Runtime sums
  u8×s8 products pairwise in 16 bits, which full 8-bit weights can saturate; 7-bit ones
  cannot, so every CPU computes the same integers (Graviton's dot products never saturate).
- Calibration reads text lines drawn with Pillow's own font (no system font needed) at five
  sizes, a third of the ink's height kept above and below as Sluice cuts lines (calibrated on
  lines with a fixed four-pixel border instead, the two-column paper's scan at 150 dpi lost
  half a point of word recall), blurred and speckled as scans are, from fixed sentences in
  the offered languages: the same model is written on every machine.

- A second model reads the Latin script only (`…-latin.onnx`): the same network with its
  classifier cut to the characters before U+2E80 — Latin with every diacritic, digits,
  punctuation, Greek and symbols, 1,748 of 18,708 — so a page in the Latin-script languages
  skips nine tenths of the classifier and its softmax (about a fifth of the time); a
  base whose languages include Chinese reads with the whole one.

    python recognizer_int8.py FP32.onnx OUT.onnx LATIN_OUT.onnx
"""

import os
import random
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper, version_converter
from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_static
from PIL import Image, ImageDraw, ImageFilter, ImageFont

LINE_HEIGHT = 48
# The first code point the Latin-only model leaves out: CJK radicals, kana, Hangul and ideographs.
FIRST_CJK = 0x2E80
CALIBRATION_LINES = 120
SENTENCES = """\
The harbour authority reported that dredging of the northern channel will begin in the autumn.
Figure 3 shows the pressure distribution (in kPa) along the leading edge at Mach 0.8.
Results for 1999–2004 are summarised in Table 2; see also “Methods”, pp. 14–17.
Owners of vessels longer than 12 m must apply for a new permit before 1 March.
Sprawozdanie zarządu portu za pierwszy kwartał: żegluga na północnym kanale została wstrzymana.
Właściciele łodzi muszą uzyskać nowe zezwolenia, źródło: kapitanat portu w Gdańsku.
Die Schifffahrt auf dem nördlichen Kanal wurde eingestellt; größere Übungen folgen im März.
L’autorité portuaire a déclaré que les élèves et leurs garçons naïfs étaient déjà arrivés.
El año pasado, el señor Muñoz pidió más información sobre la niña y el tráfico del puerto.
A administração do porto informou que a ação começará no coração da cidade, não antes.
La città ha deciso perché il traffico nel porto è aumentato del dodici per cento.
De havenautoriteit meldde dat het baggeren van de noordelijke geul in de herfst begint.
Příliš žluťoučký kůň úpěl ďábelské ódy; přístav v Brně oznámil nové předpisy.
Hamnmyndigheten i Göteborg och Malmö rapporterade att trafiken ökade med tolv procent.
""".splitlines()


def calibration_lines():
    """Deterministic scanned-looking lines: a run of words from the sentences, drawn, blurred,
    speckled, and scaled to the recognizer's height, normalised as Sluice feeds them."""
    rng = random.Random(20261206)
    noise = np.random.default_rng(20261206)
    words = " ".join(SENTENCES).split()
    for _ in range(CALIBRATION_LINES):
        count = rng.randint(2, 14)
        start = rng.randrange(len(words) - count)
        text = " ".join(words[start : start + count])
        font = ImageFont.load_default(size=rng.choice([20, 24, 28, 32, 40]))
        # A third of the ink's height kept around it, as Sluice cuts a line from a page.
        left, top, right, bottom = font.getbbox(text)
        margin = round(0.33 * (bottom - top))
        width, height = right - left + 2 * margin, bottom - top + 2 * margin
        image = Image.new("L", (width, height), 255)
        ImageDraw.Draw(image).text((margin - left, margin - top), text, font=font, fill=rng.randint(0, 60))
        image = image.filter(ImageFilter.GaussianBlur(rng.choice([0, 0.5, 0.8, 1.0])))
        pixels = np.asarray(image, dtype=np.float32) + noise.normal(0, rng.choice([0, 6, 12]), (height, width))
        image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
        scaled = max(1, min(40 * LINE_HEIGHT, round(LINE_HEIGHT * width / height)))
        line = np.asarray(image.resize((scaled, LINE_HEIGHT), Image.BICUBIC), dtype=np.float32) / 127.5 - 1.0
        batch = np.zeros((1, 3, LINE_HEIGHT, max(320, scaled)), dtype=np.float32)
        batch[0, :, :, :scaled] = line
        yield {"x": batch}


class Lines(CalibrationDataReader):
    def __init__(self):
        self.lines = calibration_lines()

    def get_next(self):
        return next(self.lines, None)


def latin_only(model):
    """`model` with its classifier cut to the dictionary's characters before U+2E80, and its
    dictionary to match: the classifier is the matrix product and bias feeding the softmax
    that is the graph's output (class 0 is CTC's blank, the last the space)."""
    nodes = {output: node for node in model.graph.node for output in node.output}
    weights = {init.name: init for init in model.graph.initializer}
    softmax = nodes[model.graph.output[0].name]
    bias_add = nodes[softmax.input[0]]
    product = next(nodes[name] for name in bias_add.input if name in nodes)
    bias = next(weights[name] for name in bias_add.input if name in weights)
    matrix = next(weights[name] for name in product.input if name in weights)
    meta = next(p for p in model.metadata_props if p.key == "character")
    characters = [line[0] for line in meta.value.split("\n") if line]
    kept = [i for i, c in enumerate(characters) if ord(c) < FIRST_CJK]
    classes = [0] + [i + 1 for i in kept] + [len(characters) + 1]
    for init in (matrix, bias):
        cut = np.ascontiguousarray(numpy_helper.to_array(init)[..., classes])
        init.CopyFrom(numpy_helper.from_array(cut, init.name))
    meta.value = "\n".join(characters[i] for i in kept)
    # The shapes recorded for the classifier's outputs name the old class count.
    stale = {product.output[0], bias_add.output[0], softmax.output[0]}
    kept_info = [info for info in model.graph.value_info if info.name not in stale]
    del model.graph.value_info[:]
    model.graph.value_info.extend(kept_info)
    model.graph.output[0].type.tensor_type.shape.dim[-1].dim_value = len(classes)
    return model


def main(source, target, latin_target):
    with tempfile.TemporaryDirectory() as work:
        original = onnx.load(source)
        raised = version_converter.convert_version(original, 13)
        del raised.metadata_props[:]
        raised.metadata_props.extend(original.metadata_props)
        raised_path, fused_path = os.path.join(work, "opset13.onnx"), os.path.join(work, "fused.onnx")
        onnx.save(raised, raised_path)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
        options.optimized_model_filepath = fused_path
        ort.InferenceSession(raised_path, options, providers=["CPUExecutionProvider"])
        quantize_static(
            fused_path,
            target,
            Lines(),
            quant_format=QuantFormat.QDQ,
            op_types_to_quantize=["Conv"],
            per_channel=True,
            reduce_range=True,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            calibrate_method=CalibrationMethod.MinMax,
        )
    written = onnx.load(target)
    # The dictionary the recognizer's outputs index travels with the model, as in the wheel's.
    if not any(p.key == "character" for p in written.metadata_props):
        written.metadata_props.extend(p for p in original.metadata_props if p.key == "character")
        onnx.save(written, target)
    onnx.save(latin_only(written), latin_target)


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3])
