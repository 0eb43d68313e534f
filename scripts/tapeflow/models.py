"""The benchmarks of the Tapeflow thesis (Table 4.1) as small ONNX training models.

Usage: models.py OUT_DIR
       models.py --batch N OUT_DIR   (nn and lenet5 on N inputs, as nn_bN and lenet5_bN)

Each model computes its own scalar objective, output "loss", from its parameters (float
initializers) and its data (graph inputs, which `swflow bench` fills with pseudo-random
values): `swflow bench OUT_DIR/<name>/model.onnx --grad --loss-output loss`. OUT_DIR/<name>/
holds model.onnx; OUT_DIR/INDEX.tsv lists name, parameters, data inputs and nodes.

  logsum      log-sum-exp of 10K weighted values
  matd        matrix-vector descent: |A v - b|^2 for a 400x400 A
  nn          an MLP on one 28x28 image (784-128-10), softmax cross-entropy
  lenet5      LeNet-5 on one 32x32 image, softmax cross-entropy
  mttkrp      the matricized tensor times Khatri-Rao product of an 8x8x8 tensor, rank 16
  gravity     one n-body step over 512 bodies (softened inverse-square forces)
  pathfinder  the row-by-row path-finding dynamic program over a 128x256 cost grid
  massspring  one step of a chain of 128 masses whose spring rest lengths an MLP controller
              (hidden 32) sets from the positions
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 20


class Model:
    """An ONNX graph under construction: parameters, data inputs and nodes."""

    def __init__(self, name, seed):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.inputs = []
        self.params = 0
        self.counter = 0

    def param(self, name, shape, scale=1.0):
        value = (self.rng.standard_normal(shape) * scale).astype(np.float32)
        self.inits.append(numpy_helper.from_array(value, name))
        self.params += value.size
        return name

    def data(self, name, shape, elem=TensorProto.FLOAT):
        self.inputs.append(helper.make_tensor_value_info(name, elem, list(shape)))
        return name

    def const(self, value):
        self.counter += 1
        name = f"c{self.counter}"
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(self, op, inputs, out=None, **attrs):
        self.counter += 1
        out = out or f"{op.lower()}_{self.counter}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def save(self, out_dir, loss):
        self.node("Identity", [loss], out="loss")
        graph = helper.make_graph(
            self.nodes,
            self.name,
            self.inputs,
            [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
            self.inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        onnx.checker.check_model(model, full_check=True)
        d = os.path.join(out_dir, self.name)
        os.makedirs(d, exist_ok=True)
        onnx.save(model, os.path.join(d, "model.onnx"))
        return f"{self.name}\t{self.params}\t{len(self.inputs)}\t{len(self.nodes)}"

    def slice(self, x, start, end, axis):
        """`x[start:end]` along `axis`."""
        bound = [self.const(np.array([v], np.int64)) for v in (start, end, axis)]
        return self.node("Slice", [x, *bound])

    def sum_of_squares(self, x):
        return self.node("ReduceSum", [self.node("Mul", [x, x])], keepdims=0)

    def gemm(self, x, w, b):
        return self.node("Gemm", [x, w, b])

    def cross_entropy(self, logits, batch=1):
        labels = self.data("label", [batch], TensorProto.INT64)
        return self.node("SoftmaxCrossEntropyLoss", [logits, labels], reduction="mean")


def logsum():
    m = Model("logsum", 1)
    x = m.data("x", [10000])
    w = m.param("w", [10000], 0.1)
    return m, m.node("ReduceLogSumExp", [m.node("Mul", [x, w])], keepdims=0)


def matd():
    m = Model("matd", 2)
    a = m.data("A", [400, 400])
    b = m.data("b", [400, 1])
    v = m.param("v", [400, 1], 0.05)
    r = m.node("Sub", [m.node("MatMul", [a, v]), b])
    return m, m.sum_of_squares(r)


def nn(batch=1):
    m = Model("nn" if batch == 1 else f"nn_b{batch}", 3)
    x = m.data("x", [batch, 784])
    h = m.node("Relu", [m.gemm(x, m.param("w1", [784, 128], 784 ** -0.5), m.param("b1", [128], 0.01))])
    logits = m.gemm(h, m.param("w2", [128, 10], 128 ** -0.5), m.param("b2", [10], 0.01))
    return m, m.cross_entropy(logits, batch)


def lenet5(batch=1):
    m = Model("lenet5" if batch == 1 else f"lenet5_b{batch}", 4)
    x = m.data("x", [batch, 1, 32, 32])
    h = m.node("Conv", [x, m.param("c1.w", [6, 1, 5, 5], 0.2), m.param("c1.b", [6], 0.01)])
    h = m.node("AveragePool", [m.node("Relu", [h])], kernel_shape=[2, 2], strides=[2, 2])
    h = m.node("Conv", [h, m.param("c2.w", [16, 6, 5, 5], 150 ** -0.5), m.param("c2.b", [16], 0.01)])
    h = m.node("AveragePool", [m.node("Relu", [h])], kernel_shape=[2, 2], strides=[2, 2])
    h = m.node("Flatten", [h])
    for i, (fan_in, fan_out) in enumerate([(400, 120), (120, 84)]):
        w = m.param(f"f{i}.w", [fan_in, fan_out], fan_in ** -0.5)
        h = m.node("Relu", [m.gemm(h, w, m.param(f"f{i}.b", [fan_out], 0.01))])
    logits = m.gemm(h, m.param("f2.w", [84, 10], 84 ** -0.5), m.param("f2.b", [10], 0.01))
    return m, m.cross_entropy(logits, batch)


def mttkrp():
    m = Model("mttkrp", 5)
    x = m.data("X", [8, 8, 8])
    b = m.param("B", [8, 16], 0.3)
    c = m.param("C", [8, 16], 0.3)
    a = m.node("Einsum", [x, b, c], equation="ijk,jr,kr->ir")
    return m, m.sum_of_squares(a)


def gravity():
    m = Model("gravity", 6)
    n, dt, soft = 512, 0.01, 0.01
    p = m.param("p", [n, 3])
    v = m.data("v", [n, 3])
    mass = m.node("Reshape", [m.data("mass", [n]), m.const(np.array([1, n, 1], np.int64))])
    to = m.node("Sub", [
        m.node("Unsqueeze", [p, m.const(np.array([0], np.int64))]),
        m.node("Unsqueeze", [p, m.const(np.array([1], np.int64))]),
    ])  # [i, j, 3]: p_j - p_i
    r2 = m.node("Add", [m.node("ReduceSum", [m.node("Mul", [to, to]), m.const(np.array([2], np.int64))]),
                        m.const(np.float32(soft))])
    inv = m.node("Pow", [r2, m.const(np.float32(-1.5))])
    force = m.node("ReduceSum", [m.node("Mul", [m.node("Mul", [to, inv]), mass]),
                                 m.const(np.array([1], np.int64))], keepdims=0)
    v2 = m.node("Add", [v, m.node("Mul", [force, m.const(np.float32(dt))])])
    p2 = m.node("Add", [p, m.node("Mul", [v2, m.const(np.float32(dt))])])
    return m, m.sum_of_squares(p2)


def pathfinder():
    m = Model("pathfinder", 7)
    rows, cols = 128, 256
    w = m.param("W", [rows, cols])

    def row(r):
        return m.slice(w, r, r + 1, 0)

    big = m.const(np.float32(1e30))
    pads = m.const(np.array([0, 1, 0, 1], np.int64))
    dp = row(0)
    for r in range(1, rows):
        padded = m.node("Pad", [dp, pads, big])
        shifted = [m.slice(padded, s, s + cols, 1) for s in range(3)]
        dp = m.node("Add", [row(r), m.node("Min", shifted)])
    return m, m.node("ReduceSum", [dp], keepdims=0)


def massspring():
    m = Model("massspring", 8)
    n, hidden, dt, k = 128, 32, 0.01, 10.0
    x = m.data("x", [n, 2])
    v = m.data("v", [n, 2])
    flat = m.node("Reshape", [x, m.const(np.array([1, 2 * n], np.int64))])
    h = m.node("Tanh", [m.gemm(flat, m.param("w1", [2 * n, hidden], (2 * n) ** -0.5), m.param("b1", [hidden], 0.01))])
    act = m.node("Tanh", [m.gemm(h, m.param("w2", [hidden, n - 1], hidden ** -0.5), m.param("b2", [n - 1], 0.01))])
    rest = m.node("Reshape", [m.node("Add", [m.const(np.float32(1.0)), m.node("Mul", [act, m.const(np.float32(0.1))])]),
                              m.const(np.array([n - 1, 1], np.int64))])
    d = m.node("Sub", [m.slice(x, 1, n, 0), m.slice(x, 0, n - 1, 0)])  # [n-1, 2]
    length = m.node("Sqrt", [m.node("Add", [m.node("ReduceSum", [m.node("Mul", [d, d]), m.const(np.array([1], np.int64))]),
                                            m.const(np.float32(1e-6))])])
    f = m.node("Mul", [m.node("Mul", [m.node("Sub", [length, rest]), m.const(np.float32(k))]), m.node("Div", [d, length])])
    pull = m.node("Pad", [f, m.const(np.array([0, 0, 1, 0], np.int64))])   # node i pulled toward i+1
    push = m.node("Pad", [f, m.const(np.array([1, 0, 0, 0], np.int64))])   # node i+1 pulled back
    force = m.node("Sub", [pull, push])
    v2 = m.node("Add", [v, m.node("Mul", [force, m.const(np.float32(dt))])])
    x2 = m.node("Add", [x, m.node("Mul", [v2, m.const(np.float32(dt))])])
    along = m.slice(x2, 0, 1, 1)
    return m, m.node("Neg", [m.node("ReduceMean", [along], keepdims=0)])


MODELS = [logsum, matd, nn, lenet5, mttkrp, gravity, pathfinder, massspring]


def main(out):
    os.makedirs(out, exist_ok=True)
    lines = ["# name\tparameters\tdata inputs\tnodes"]
    for make in MODELS:
        m, loss = make()
        lines.append(m.save(out, loss))
        print(lines[-1])
    with open(os.path.join(out, "INDEX.tsv"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main_batch(batch, out):
    for make in (nn, lenet5):
        m, loss = make(batch)
        print(m.save(out, loss))


if __name__ == "__main__":
    if sys.argv[1] == "--batch":
        main_batch(int(sys.argv[2]), sys.argv[3])
    else:
        main(sys.argv[1])
