"""Builds the eight models of the swTVM paper's evaluation (Table I) as ONNX files with seeded
random weights, and their reference outputs from onnxruntime.

    python scripts/models/build.py OUT_DIR [--models a,b,...] [--batches 1,2,4,8] [--noise] [--repeat 3]

Writes, under OUT_DIR:
  <model>/model.onnx                      ai.onnx opset 18, IR version 8 (the IR version onnx's
                                          VERSION_TABLE pairs with opset 18), batch dim "N"
  <model>/batch_<b>/input_<k>.pb          TensorProtos named after the graph inputs/outputs, in
  <model>/batch_<b>/output_<k>.pb         graph order, as the ONNX backend test data sets store them
  INDEX.tsv                               name, nodes, parameters, file bytes, input shapes
Every byte is the same from run to run for given onnx, onnxruntime and numpy versions. The
reference outputs come from onnxruntime (CPU, default session options); --noise also runs every
batch with graph optimisations disabled and prints the largest differences (the f32 noise floor
of the model; "rel" is over the elements with |ref| > 1e-3 max |ref|). The inputs of batch b are
the first b rows of one seeded batch of 8, so batch b's outputs should equal the first b rows of
batch 8's (printed). Per output the script prints min, max, mean |x| and the row spread (how much
the output depends on the input), and stops on non-finite, all-zero or input-independent output.

Weights: numpy default_rng, one fixed seed per model. Convolutions He-normal (std sqrt(2/fan_in);
ConvTranspose fan_in = cin*k*k/stride^2), the last layer of each model std sqrt(1/fan_in) so the
outputs are O(1), biases N(0, 0.02). BatchNormalization stays a separate node in inference mode,
gamma ~ 1 + N(0, 0.1), beta ~ N(0, 0.05); its running mean and variance are calibrated (see
Graph.calibrate): the statistics of the data the layer sees on 4 seeded calibration inputs, as
training leaves them, times a small perturbation. Random running statistics near 0/1 do not
normalise anything: the positive mean after each ReLU piles up through the residual stages
(ResNet-50 and ShuffleNet logits came out ~1e3 and almost independent of the input). The
statistics are rounded to 11 significant bits so last-bit differences of onnxruntime between
machines leave the model's bytes alone.

Models:
  resnet18, resnet50  He et al. 2016, torchvision layout (v1.5: stride on the bottleneck's 3x3),
                      BasicBlock [2,2,2,2] / Bottleneck [3,4,6,3], conv bias-free, GlobalAveragePool,
                      Flatten, Gemm 1000. Output logits (N,1000).
  vgg16               Simonyan & Zisserman 2015 configuration D with biases, 13 conv3x3+ReLU, five
                      MaxPool 2x2, FC 4096-4096-1000. torchvision's AdaptiveAvgPool(7,7) is left
                      out (an identity at 224x224) and so is Dropout (inference). With no
                      BatchNorm the mean after each ReLU is not removed, so most of the logits
                      does not depend on the input (row spread ~0.07, the lowest of the eight).
  mobilenet           Howard et al. 2017 v1, width 1.0, Table 1: conv3x3/2 32, 13 depthwise-separable
                      blocks (dw3x3+BN+ReLU, pw1x1+BN+ReLU), AveragePool 7x7, FC 1000. Departure:
                      the final Softmax is left out, the output is logits like the others.
  shufflenet          Zhang et al. 2017 v1, groups=3, width 1.0, Table 1: conv3x3/2 24, MaxPool,
                      stages of 4/8/4 units to 240/480/960 channels, bottleneck = out/4, no grouping
                      on the first 1x1 of stage 2, channel shuffle after the first GConv+BN+ReLU
                      (Reshape/Transpose/Reshape), stride-2 units concat an AveragePool 3x3/2
                      shortcut, then ReLU; GlobalAveragePool, FC 1000 (logits).
  yolov3              Redmon & Farhadi 2018, yolov3.cfg: Darknet-53 (conv+BN+LeakyRelu 0.1,
                      residual 1-2-8-8-4), three heads (5 convs, 3x3, 1x1 to 255 = 3*(5+80) with
                      bias), 1x1 + Resize (nearest, scale 2) + Concat with the 26x26/52x52 routes.
                      Outputs the raw head tensors (N,255,13,13), (N,255,26,26), (N,255,52,52),
                      without the YOLO decoding layer.
  dcgan               Radford et al. 2015 generator as in the PyTorch DCGAN example (nz=100,
                      ngf=64): ConvTranspose 4x4 1->4 (stride 1) then 4 stride-2 ones,
                      512-256-128-64-3, bias-free, BN+ReLU, Tanh. Departure: weights He-scaled
                      instead of the paper's N(0, 0.02), so activations keep their scale.
  bert_base           Devlin et al. 2019 BERT-base uncased (HF BertModel layout), seq len 16:
                      Gather embeddings (word + token type + position, position ids sliced from
                      a (1,512) buffer by Shape), LayerNormalization eps 1e-12, 12 layers of
                      12-head attention with the mask as (1 - mask) * -10000 added to the scores,
                      exporter GELU x*0.5*(1+Erf(x/sqrt 2)); outputs last_hidden_state (N,16,768)
                      and pooler_output (N,768) (tanh dense of token 0). Dense layers are
                      MatMul+Add with (in, out) weights as exporters write them (Gemm for the
                      pooler). Departure: dense weight std 1/sqrt(fan_in) (embeddings std 1)
                      instead of BERT's 0.02, so the attention is not near-uniform; LayerNorm
                      gamma ~ 1 + N(0, 0.1), beta ~ N(0, 0.05).
Parameter counts are trainable parameters (BatchNorm running statistics and constants excluded),
so they can be compared with the published figures.
"""

import argparse
import os
import sys
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OPSET = 18
IR_VERSION = helper.find_min_ir_version_for([helper.make_opsetid("", OPSET)])
FLOAT, INT64 = TensorProto.FLOAT, TensorProto.INT64
ALL_MODELS = ["resnet18", "resnet50", "vgg16", "mobilenet", "shufflenet", "yolov3", "dcgan", "bert_base"]
SEEDS = {name: 1000 + i for i, name in enumerate(ALL_MODELS)}


class Graph:
    """A small graph builder: nodes named the way the torch exporter names them, weights as
    initializers, shapes and scalars as Constant nodes."""

    def __init__(self, name, seed):
        self.name, self.rng = name, np.random.default_rng(seed)
        self.nodes, self.inits, self.inputs, self.outputs, self.bns = [], {}, [], [], []
        self.n_params, self._used, self._consts = 0, set(), {}

    def op(self, op_type, inputs, name=None, out=None, n_out=1, **attrs):
        base = f"/{name.replace('.', '/')}/{op_type}" if name else f"/{op_type}"
        node_name, k = base, 0
        while node_name in self._used:
            k += 1
            node_name = f"{base}_{k}"
        self._used.add(node_name)
        outs = [out] if out else [f"{node_name}_output_{i}" for i in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=node_name, **attrs))
        return outs[0] if n_out == 1 else outs

    def param(self, name, value, trainable=True):
        self.inits[name] = numpy_helper.from_array(np.ascontiguousarray(value), name)
        self.n_params += value.size if trainable else 0
        return name

    def const(self, value, dtype=np.int64):
        value = np.asarray(value, dtype=dtype)
        key = (value.dtype.str, value.shape, value.tobytes())
        if key not in self._consts:
            self._consts[key] = self.op("Constant", [], value=numpy_helper.from_array(value))
        return self._consts[key]

    def fconst(self, value):
        return self.const(value, np.float32)

    def normal(self, shape, std):
        return (self.rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float32)

    def input(self, name, elem, shape):
        self.inputs.append(helper.make_tensor_value_info(name, elem, shape))
        return name

    def output(self, name, elem, shape):
        self.outputs.append(helper.make_tensor_value_info(name, elem, shape))

    # -- layers -------------------------------------------------------------------------------
    def conv(self, x, name, cin, cout, k, s=1, p=0, groups=1, bias=False, gain=2.0, out=None):
        fan_in = cin // groups * k * k
        w = self.param(f"{name}.weight", self.normal((cout, cin // groups, k, k), np.sqrt(gain / fan_in)))
        ins = [x, w] + ([self.param(f"{name}.bias", self.normal((cout,), 0.02))] if bias else [])
        return self.op("Conv", ins, name, out=out, dilations=[1, 1], group=groups, kernel_shape=[k, k],
                       pads=[p] * 4, strides=[s, s])

    def conv_t(self, x, name, cin, cout, k, s, p, gain=2.0):
        fan_in = cin * k * k // (s * s)
        w = self.param(f"{name}.weight", self.normal((cin, cout, k, k), np.sqrt(gain / fan_in)))
        return self.op("ConvTranspose", [x, w], name, dilations=[1, 1], group=1, kernel_shape=[k, k],
                       output_padding=[0, 0], pads=[p] * 4, strides=[s, s])

    def bn(self, x, name, c):
        r = self.rng
        gamma = self.param(f"{name}.weight", (1 + 0.1 * r.standard_normal(c)).astype(np.float32))
        beta = self.param(f"{name}.bias", (0.05 * r.standard_normal(c)).astype(np.float32))
        # running statistics: placeholders until calibrate() sets them
        mean = self.param(f"{name}.running_mean", np.zeros(c, np.float32), False)
        var = self.param(f"{name}.running_var", np.ones(c, np.float32), False)
        self.bns.append((mean, var, c))
        return self.op("BatchNormalization", [x, gamma, beta, mean, var], name, epsilon=1e-5, momentum=0.9)

    def gemm(self, x, name, cin, cout, gain=2.0, out=None):
        w = self.param(f"{name}.weight", self.normal((cout, cin), np.sqrt(gain / cin)))
        b = self.param(f"{name}.bias", self.normal((cout,), 0.02))
        return self.op("Gemm", [x, w, b], name, out=out, alpha=1.0, beta=1.0, transB=1)

    def linear(self, x, name, cin, cout, gain=1.0):
        """A torch Linear on a 3-D input, as exporters write it: MatMul by the transposed weight, Add."""
        w = self.param(f"{name}.weight", self.normal((cin, cout), np.sqrt(gain / cin)))
        b = self.param(f"{name}.bias", self.normal((cout,), 0.02))
        return self.op("Add", [self.op("MatMul", [x, w], name), b], name)

    def layer_norm(self, x, name, c, out=None):
        g = self.param(f"{name}.weight", (1 + 0.1 * self.rng.standard_normal(c)).astype(np.float32))
        b = self.param(f"{name}.bias", (0.05 * self.rng.standard_normal(c)).astype(np.float32))
        return self.op("LayerNormalization", [x, g, b], name, out=out, axis=-1, epsilon=1e-12)

    def relu(self, x, out=None):
        return self.op("Relu", [x], out=out)

    def maxpool(self, x, k, s, p):
        return self.op("MaxPool", [x], ceil_mode=0, kernel_shape=[k, k], pads=[p] * 4, strides=[s, s])

    def avgpool(self, x, k, s, p):
        return self.op("AveragePool", [x], ceil_mode=0, count_include_pad=1, kernel_shape=[k, k],
                       pads=[p] * 4, strides=[s, s])

    def classifier(self, x, cin, name="fc", pool=True):
        if pool:
            x = self.op("GlobalAveragePool", [x])
        x = self.op("Flatten", [x], axis=1)
        self.output("output", FLOAT, ["N", 1000])
        return self.gemm(x, name, cin, 1000, gain=1.0, out="output")

    def calibrate(self, feeds):
        """Sets the BatchNorm running statistics to the statistics of the data the layer sees, as
        training leaves them: one onnxruntime run of a copy of the graph whose BatchNormalization
        nodes use the batch statistics, whose means and variances are outputs. They are then
        perturbed a little (so they are not the exact batch statistics) and rounded to 11
        significant bits (so last-bit differences between machines do not change the bytes)."""
        nodes, outs, eps = [], [], numpy_helper.from_array(np.array(1e-5, np.float32), "calib.eps")
        consts = [eps, numpy_helper.from_array(np.array([0, 2, 3]), "calib.axes"),
                  numpy_helper.from_array(np.array([1, 2]), "calib.chw")]
        for n in self.nodes:
            if n.op_type != "BatchNormalization":
                nodes.append(n)
                continue
            x, gamma, beta = n.input[:3]

            def mk(op, ins, suffix, out=None):
                nodes.append(helper.make_node(op, ins, [out or n.name + suffix]))
                return out or n.name + suffix
            m = mk("ReduceMean", [x, "calib.axes"], "/mean")
            d = mk("Sub", [x, m], "/d")
            v = mk("ReduceMean", [mk("Mul", [d, d], "/d2"), "calib.axes"], "/var")
            y = mk("Div", [d, mk("Sqrt", [mk("Add", [v, "calib.eps"], "/ve")], "/sd")], "/y")
            y = mk("Mul", [y, mk("Unsqueeze", [gamma, "calib.chw"], "/g")], "/yg")
            mk("Add", [y, mk("Unsqueeze", [beta, "calib.chw"], "/b")], "", out=n.output[0])
            outs += [m, v]
        graph = helper.make_graph(nodes, "calib", self.inputs, [helper.make_tensor_value_info(o, FLOAT, None)
                                  for o in outs], list(self.inits.values()) + consts)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        m.ir_version = IR_VERSION
        stats = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
        for (mean, var, c), bm, bv in zip(self.bns, stats[0::2], stats[1::2]):
            bm, bv = bm.reshape(c).astype(np.float64), np.maximum(bv.reshape(c), 1e-3 * bv.mean())
            bm = bm + 0.05 * np.sqrt(bv) * self.rng.standard_normal(c)
            bv = bv * self.rng.uniform(0.9, 1.1, c)
            for name, value in [(mean, bm), (var, bv)]:
                frac, exp = np.frexp(value)
                value = np.ldexp(np.round(frac * 2048) / 2048, exp).astype(np.float32)
                self.inits[name] = numpy_helper.from_array(value, name)

    def model(self):
        graph = helper.make_graph(self.nodes, self.name, self.inputs, self.outputs, list(self.inits.values()))
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="swflow scripts/models/build.py", producer_version=onnx.__version__)
        m.ir_version = IR_VERSION
        return m


def image_input(g, size=224):
    return g.input("input", FLOAT, ["N", 3, size, size])


# -- models -----------------------------------------------------------------------------------
def resnet(name, blocks, bottleneck):
    g = Graph(name, SEEDS[name])
    x = g.relu(g.bn(g.conv(image_input(g), "conv1", 3, 64, 7, 2, 3), "bn1", 64))
    x = g.maxpool(x, 3, 2, 1)
    cin, expansion = 64, 4 if bottleneck else 1
    for i, (n, width) in enumerate(zip(blocks, [64, 128, 256, 512])):
        cout = width * expansion
        for j in range(n):
            p, s = f"layer{i + 1}.{j}", 2 if j == 0 and i > 0 else 1
            if bottleneck:
                y = g.relu(g.bn(g.conv(x, f"{p}.conv1", cin, width, 1), f"{p}.bn1", width))
                y = g.relu(g.bn(g.conv(y, f"{p}.conv2", width, width, 3, s, 1), f"{p}.bn2", width))
                y = g.bn(g.conv(y, f"{p}.conv3", width, cout, 1), f"{p}.bn3", cout)
            else:
                y = g.relu(g.bn(g.conv(x, f"{p}.conv1", cin, width, 3, s, 1), f"{p}.bn1", width))
                y = g.bn(g.conv(y, f"{p}.conv2", width, width, 3, 1, 1), f"{p}.bn2", width)
            if s != 1 or cin != cout:
                x = g.bn(g.conv(x, f"{p}.downsample.0", cin, cout, 1, s), f"{p}.downsample.1", cout)
            x = g.relu(g.op("Add", [y, x], p))
            cin = cout
    g.classifier(x, cin)
    return g


def resnet18():
    return resnet("resnet18", [2, 2, 2, 2], False)


def resnet50():
    return resnet("resnet50", [3, 4, 6, 3], True)


def vgg16():
    g = Graph("vgg16", SEEDS["vgg16"])
    x, cin, idx = image_input(g), 3, 0
    for v in [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]:
        if v == "M":
            x, idx = g.maxpool(x, 2, 2, 0), idx + 1
        else:
            x, cin, idx = g.relu(g.conv(x, f"features.{idx}", cin, v, 3, 1, 1, bias=True)), v, idx + 2
    x = g.op("Flatten", [x], axis=1)
    x = g.relu(g.gemm(x, "classifier.0", 512 * 7 * 7, 4096))
    x = g.relu(g.gemm(x, "classifier.3", 4096, 4096))
    g.output("output", FLOAT, ["N", 1000])
    g.gemm(x, "classifier.6", 4096, 1000, gain=1.0, out="output")
    return g


def mobilenet():
    g = Graph("mobilenet", SEEDS["mobilenet"])
    x = g.relu(g.bn(g.conv(image_input(g), "conv0", 3, 32, 3, 2, 1), "bn0", 32))
    cin = 32
    cfg = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + [(1024, 2), (1024, 1)]
    for i, (cout, s) in enumerate(cfg):
        p = f"blocks.{i}"
        x = g.relu(g.bn(g.conv(x, f"{p}.dw", cin, cin, 3, s, 1, groups=cin), f"{p}.dw_bn", cin))
        x = g.relu(g.bn(g.conv(x, f"{p}.pw", cin, cout, 1), f"{p}.pw_bn", cout))
        cin = cout
    x = g.avgpool(x, 7, 1, 0)
    g.classifier(x, cin, pool=False)
    return g


def shufflenet(groups=3):
    g = Graph("shufflenet", SEEDS["shufflenet"])
    x = g.relu(g.bn(g.conv(image_input(g), "first_conv", 3, 24, 3, 2, 1), "first_bn", 24))
    x, cin, hw = g.maxpool(x, 3, 2, 1), 24, 56
    for si, (cout, repeat) in enumerate([(240, 4), (480, 8), (960, 4)]):
        mid = cout // 4
        for j in range(repeat):
            p, s = f"stage{si + 2}.{j}", 2 if j == 0 else 1
            branch_out = cout - cin if s == 2 else cout
            g1 = 1 if si == 0 and j == 0 else groups
            y = g.relu(g.bn(g.conv(x, f"{p}.gconv1", cin, mid, 1, groups=g1), f"{p}.bn1", mid))
            # channel shuffle: view(N, g, C/g, H, W).transpose(1, 2).view(N, C, H, W)
            y = g.op("Reshape", [y, g.const([0, groups, mid // groups, hw, hw])])
            y = g.op("Transpose", [y], perm=[0, 2, 1, 3, 4])
            y = g.op("Reshape", [y, g.const([0, mid, hw, hw])])
            hw //= s
            y = g.bn(g.conv(y, f"{p}.dwconv", mid, mid, 3, s, 1, groups=mid), f"{p}.bn2", mid)
            y = g.bn(g.conv(y, f"{p}.gconv2", mid, branch_out, 1, groups=groups), f"{p}.bn3", branch_out)
            if s == 2:
                x = g.relu(g.op("Concat", [g.avgpool(x, 3, 2, 1), y], p, axis=1))
            else:
                x = g.relu(g.op("Add", [x, y], p))
            cin = cout
    g.classifier(x, cin)
    return g


def yolov3():
    g = Graph("yolov3", SEEDS["yolov3"])
    count = [0]

    def cbl(x, cin, cout, k, s=1):  # darknet [convolutional] with batch_normalize=1, leaky
        p = f"conv{count[0]}"
        count[0] += 1
        y = g.bn(g.conv(x, p, cin, cout, k, s, k // 2), f"{p}.bn", cout)
        return g.op("LeakyRelu", [y], p, alpha=0.1)

    x, cin, routes = cbl(image_input(g, 416), 3, 32, 3), 32, {}
    for c, n in [(64, 1), (128, 2), (256, 8), (512, 8), (1024, 4)]:
        x, cin = cbl(x, cin, c, 3, 2), c
        for _ in range(n):
            x = g.op("Add", [x, cbl(cbl(x, c, c // 2, 1), c // 2, c, 3)])
        routes[c] = x

    def head(x, cin, c, size):
        for k in range(5):
            x, cin = cbl(x, cin, c if k % 2 == 0 else 2 * c, 1 if k % 2 == 0 else 3), c if k % 2 == 0 else 2 * c
        out = f"output_{size}"
        g.output(out, FLOAT, ["N", 255, size, size])
        g.conv(cbl(x, c, 2 * c, 3), f"conv{count[0]}", 2 * c, 255, 1, bias=True, gain=1.0, out=out)
        count[0] += 1
        return x

    x = head(x, 1024, 512, 13)
    for c, route, size in [(256, routes[512], 26), (128, routes[256], 52)]:
        x = cbl(x, 2 * c, c, 1)
        x = g.op("Resize", [x, "", g.fconst([1, 1, 2, 2])], coordinate_transformation_mode="asymmetric",
                 cubic_coeff_a=-0.75, mode="nearest", nearest_mode="floor")
        x = head(g.op("Concat", [x, route], axis=1), c + 2 * c, c, size)
    return g


def dcgan():
    g = Graph("dcgan", SEEDS["dcgan"])
    x = g.input("z", FLOAT, ["N", 100, 1, 1])
    chans = [100, 512, 256, 128, 64, 3]
    for i in range(5):
        s, p = (1, 0) if i == 0 else (2, 1)
        x = g.conv_t(x, f"main.{3 * i}", chans[i], chans[i + 1], 4, s, p, gain=2.0 if i < 4 else 1.0)
        if i < 4:
            x = g.relu(g.bn(x, f"main.{3 * i + 1}", chans[i + 1]))
    g.output("output", FLOAT, ["N", 3, 64, 64])
    g.op("Tanh", [x], out="output")
    return g


def bert_base(layers=12, hidden=768, heads=12, ffn=3072, vocab=30522, max_pos=512, seq=16):
    g = Graph("bert_base", SEEDS["bert_base"])
    ids = g.input("input_ids", INT64, ["N", seq])
    types = g.input("token_type_ids", INT64, ["N", seq])
    mask = g.input("attention_mask", INT64, ["N", seq])
    e = "embeddings"
    word = g.param(f"{e}.word_embeddings.weight", g.normal((vocab, hidden), 1.0))
    pos = g.param(f"{e}.position_embeddings.weight", g.normal((max_pos, hidden), 1.0))
    typ = g.param(f"{e}.token_type_embeddings.weight", g.normal((2, hidden), 1.0))
    # position_ids = self.position_ids[:, :seq_length], seq_length = input_ids.size(1)
    seq_len = g.op("Unsqueeze", [g.op("Gather", [g.op("Shape", [ids]), g.const(1)], axis=0), g.const([0])])
    pos_ids = g.op("Slice", [g.const(np.arange(max_pos)[None]), g.const([0]), seq_len, g.const([1]), g.const([1])])
    x = g.op("Add", [g.op("Gather", [word, ids], f"{e}.word_embeddings", axis=0),
                     g.op("Gather", [typ, types], f"{e}.token_type_embeddings", axis=0)])
    x = g.op("Add", [x, g.op("Gather", [pos, pos_ids], f"{e}.position_embeddings", axis=0)])
    x = g.layer_norm(x, f"{e}.LayerNorm", hidden)
    # extended_attention_mask = (1.0 - mask[:, None, None, :].float()) * -10000.0
    m = g.op("Cast", [g.op("Unsqueeze", [mask, g.const([1, 2])])], to=FLOAT)
    m = g.op("Mul", [g.op("Sub", [g.fconst(1.0), m]), g.fconst(-10000.0)])
    dh = hidden // heads
    for i in range(layers):
        p = f"encoder.layer.{i}"
        a = f"{p}.attention.self"

        def split_heads(t, perm):  # view(N, S, heads, dh).permute(...)
            return g.op("Transpose", [g.op("Reshape", [t, g.const([0, 0, heads, dh])])], perm=perm)

        q = split_heads(g.linear(x, f"{a}.query", hidden, hidden), [0, 2, 1, 3])
        k = split_heads(g.linear(x, f"{a}.key", hidden, hidden), [0, 2, 3, 1])
        v = split_heads(g.linear(x, f"{a}.value", hidden, hidden), [0, 2, 1, 3])
        scores = g.op("Div", [g.op("MatMul", [q, k], a), g.fconst(np.sqrt(dh))])
        probs = g.op("Softmax", [g.op("Add", [scores, m])], a, axis=-1)
        ctx = g.op("Transpose", [g.op("MatMul", [probs, v], a)], perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, g.const([0, 0, hidden])])
        y = g.linear(ctx, f"{p}.attention.output.dense", hidden, hidden)
        x = g.layer_norm(g.op("Add", [y, x]), f"{p}.attention.output.LayerNorm", hidden)
        h = g.linear(x, f"{p}.intermediate.dense", hidden, ffn)
        erf = g.op("Erf", [g.op("Div", [h, g.fconst(np.sqrt(2.0))])])
        h = g.op("Mul", [g.op("Mul", [h, g.fconst(0.5)]), g.op("Add", [erf, g.fconst(1.0)])])
        y = g.linear(h, f"{p}.output.dense", ffn, hidden)
        last = "last_hidden_state" if i == layers - 1 else None
        x = g.layer_norm(g.op("Add", [y, x]), f"{p}.output.LayerNorm", hidden, out=last)
    g.output("last_hidden_state", FLOAT, ["N", seq, hidden])
    g.output("pooler_output", FLOAT, ["N", hidden])
    first = g.op("Gather", [x, g.const(0)], axis=1)
    g.op("Tanh", [g.gemm(first, "pooler.dense", hidden, hidden, gain=1.0)], out="pooler_output")
    return g


BUILDERS = {"resnet18": resnet18, "resnet50": resnet50, "vgg16": vgg16, "mobilenet": mobilenet,
            "shufflenet": shufflenet, "yolov3": yolov3, "dcgan": dcgan, "bert_base": bert_base}


# -- inputs, checks, reference outputs --------------------------------------------------------
def make_inputs(name, rows, rng=None):
    """One seeded batch of `rows` rows per model; batch b uses the first b rows."""
    rng = rng or np.random.default_rng(SEEDS[name] + 1)
    if name == "dcgan":
        return [rng.standard_normal((rows, 100, 1, 1), dtype=np.float32)]
    if name == "bert_base":
        ids = rng.integers(0, 30522, (rows, 16), dtype=np.int64)
        split = rng.integers(4, 13, rows)
        types = (np.arange(16)[None] >= split[:, None]).astype(np.int64)
        # even rows end with 2, 3, 4, 5 padding positions (mask 0); odd rows have none
        pad = np.where(np.arange(rows) % 2 == 0, 2 + np.arange(rows) // 2, 0)
        mask = (np.arange(16)[None] < 16 - pad[:, None]).astype(np.int64)
        return [ids, types, mask]
    size = 416 if name == "yolov3" else 224
    return [rng.random((rows, 3, size, size), dtype=np.float32)]


ALLOWED_OPS = set("""Conv ConvTranspose Gemm MatMul Add Sub Mul Div Pow Sqrt Exp Erf Relu LeakyRelu Sigmoid
Tanh Clip Softmax MaxPool AveragePool GlobalAveragePool BatchNormalization LayerNormalization ReduceMean
Reshape Flatten Transpose Concat Split Slice Squeeze Unsqueeze Gather Constant Shape Cast Where Equal
Resize Expand""".split())


def check(model):
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    declared = {o.name: o.type for o in model.graph.output}
    for o in inferred.graph.output:
        if o.type != declared[o.name]:
            raise SystemExit(f"{model.graph.name}: output {o.name} inferred {o.type} != declared")
    ops = set(n.op_type for n in model.graph.node)
    if ops - ALLOWED_OPS:
        raise SystemExit(f"{model.graph.name}: op types outside the allowed set: {sorted(ops - ALLOWED_OPS)}")


def stats(name, arr):
    """min, max, mean |x|, and (batch > 1) how much the rows differ: mean over elements of the std
    over the batch, relative to mean |x|; near 0 means the output hardly depends on the input."""
    a = np.abs(arr)
    bad = not np.all(np.isfinite(arr)) or a.max() == 0 or float(np.std(arr)) < 1e-4
    text = f"{name} {list(arr.shape)} min {arr.min():.4g} max {arr.max():.4g} mean|.| {a.mean():.4g}"
    if len(arr) > 1:
        spread = float(arr.std(axis=0).mean() / a.mean())
        bad |= spread < 1e-2
        text += f" row spread {spread:.3g}"
    return text, bad


def session(path, optimize=True):
    so = ort.SessionOptions()
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def timed_run(sess, feeds, repeat):
    outs = sess.run(None, feeds)  # warm-up, and the reference
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t)
    return outs, float(np.median(times)) if times else float("nan")


def diff(a, b):
    """Largest |a-b|; largest |a-b|/|b| over the elements with |b| > 1e-3 max|b|; and the atol that
    |a-b| <= atol + 1e-3 |b| needs (the form of the project tolerance, frontend/src/tolerance.rs)."""
    d, mag = np.abs(a.astype(np.float64) - b), np.abs(b.astype(np.float64))
    big = mag > 1e-3 * mag.max()
    return d.max(), (d[big] / mag[big]).max(), np.maximum(d - 1e-3 * mag, 0).max()


def describe_inputs(model):
    def dims(t):
        return ",".join(d.dim_param or str(d.dim_value) for d in t.shape.dim)
    return ";".join(f"{i.name}:{dims(i.type.tensor_type)}:"
                    + TensorProto.DataType.Name(i.type.tensor_type.elem_type).lower() for i in model.graph.input)


def build_one(name, root, batches, repeat, noise):
    t0 = time.perf_counter()
    g = BUILDERS[name]()
    if g.bns:
        rng = np.random.default_rng(SEEDS[name] + 2)
        g.calibrate({i.name: v for i, v in zip(g.inputs, make_inputs(name, 4, rng))})
    model = g.model()
    check(model)
    folder = os.path.join(root, name)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, "model.onnx")
    onnx.save(model, path)
    t_build, size = time.perf_counter() - t0, os.path.getsize(path)
    n_ops = {}
    for n in model.graph.node:
        n_ops[n.op_type] = n_ops.get(n.op_type, 0) + 1
    ops = ", ".join(f"{k} {v}" for k, v in sorted(n_ops.items(), key=lambda kv: -kv[1]))
    print(f"[{name}] {len(model.graph.node)} nodes, {g.n_params:,} params, {size:,} bytes, "
          f"built+checked+saved in {t_build:.1f} s\n  ops: {ops}", flush=True)
    in_names = [i.name for i in model.graph.input]
    out_names = [o.name for o in model.graph.output]
    index_line = f"{name}\t{len(model.graph.node)}\t{g.n_params}\t{size}\t{describe_inputs(model)}"
    del model, g
    sess = session(path)
    slow = session(path, optimize=False) if noise else None
    full = make_inputs(name, 8)
    first = {}
    bad_any = False
    for b in batches:
        feeds = {n: v[:b] for n, v in zip(in_names, full)}
        outs, t_run = timed_run(sess, feeds, repeat)
        bdir = os.path.join(folder, f"batch_{b}")
        os.makedirs(bdir, exist_ok=True)
        for kind, names, values in [("input", in_names, [feeds[n] for n in in_names]),
                                    ("output", out_names, outs)]:
            for k, (n, v) in enumerate(zip(names, values)):
                with open(os.path.join(bdir, f"{kind}_{k}.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(v, n).SerializeToString())
        line = [f"  batch {b}: ort {t_run * 1e3:.1f} ms"]
        for n, v in zip(out_names, outs):
            s, bad = stats(n, v)
            bad_any |= bad
            line.append(s + (" DEGENERATE" if bad else ""))
        first[b] = outs
        if noise:
            ref = slow.run(None, feeds)
            line.append("noise (ORT_DISABLE_ALL vs default): " + "; ".join(
                "%s abs %.3g rel %.3g atol@rtol=1e-3 %.3g" % ((n,) + diff(o, r))
                for n, o, r in zip(out_names, outs, ref)))
        print("\n    ".join(line), flush=True)
    bmax = max(batches)
    for b in batches:
        if b != bmax:
            d = max(float(np.abs(o - f[:b]).max()) for o, f in zip(first[b], first[bmax]))
            print(f"  batch {b} vs first rows of batch {bmax}: max |diff| {d:.3g}")
    if bad_any:
        raise SystemExit(f"{name}: degenerate outputs")
    print(f"  done in {time.perf_counter() - t0:.1f} s", flush=True)
    return index_line


def write_index(root, lines):
    path = os.path.join(root, "INDEX.tsv")
    rows = {}
    if os.path.exists(path):
        for line in open(path):
            if line.strip() and not line.startswith("#"):
                rows[line.split("\t")[0]] = line.rstrip("\n")
    rows.update(lines)
    with open(path, "w") as f:
        f.write("# name\tnodes\tparams\tfile_bytes\tinputs (name:shape:type)\n")
        for name in ALL_MODELS:
            if name in rows:
                f.write(rows[name] + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--models", default=",".join(ALL_MODELS))
    ap.add_argument("--batches", default="1,2,4,8")
    ap.add_argument("--repeat", type=int, default=3, help="timed onnxruntime runs per batch (median shown)")
    ap.add_argument("--noise", action="store_true", help="compare with onnxruntime's ORT_DISABLE_ALL")
    args = ap.parse_args()
    models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in BUILDERS]
    if unknown:
        ap.error(f"unknown models {unknown}; known: {','.join(ALL_MODELS)}")
    batches = sorted(int(b) for b in args.batches.split(","))
    if max(batches) > 8 or min(batches) < 1:
        ap.error("batch sizes must be within 1..8")
    ort.set_default_logger_severity(3)
    print(f"onnx {onnx.__version__}, onnxruntime {ort.__version__}, numpy {np.__version__}; opset {OPSET}, "
          f"IR {IR_VERSION}", flush=True)
    os.makedirs(args.out, exist_ok=True)
    t0 = time.perf_counter()
    for name in models:
        write_index(args.out, {name: build_one(name, args.out, batches, args.repeat, args.noise)})
    print(f"all done in {time.perf_counter() - t0:.1f} s; index in {os.path.join(args.out, 'INDEX.tsv')}")


if __name__ == "__main__":
    sys.exit(main())
