"""Builds the LeNet-style example model shipped in examples/lenet.

Writes model.onnx (seeded weights), input.npy (a seeded input) and expected_prob.npy, the
output computed by onnx's own reference evaluator, so the example's expected output does not
come from swflow. Run with the venv made by scripts/setup-conformance.sh:

    .cache/venv/bin/python scripts/make_example.py examples/lenet
"""

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(2024)

    def weight(name, shape, fan_in):
        value = (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)
        return numpy_helper.from_array(value, name)

    inits = [
        weight("conv1.w", (6, 1, 5, 5), 25),
        weight("conv1.b", (6,), 25),
        weight("conv2.w", (16, 6, 5, 5), 150),
        weight("conv2.b", (16,), 150),
        weight("fc1.w", (120, 400), 400),
        weight("fc1.b", (120,), 400),
        weight("fc2.w", (84, 120), 120),
        weight("fc2.b", (84,), 120),
        weight("fc3.w", (10, 84), 84),
        weight("fc3.b", (10,), 84),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "conv1.w", "conv1.b"], ["c1"], name="conv1", pads=[2, 2, 2, 2]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2.w", "conv2.b"], ["c2"], name="conv2"),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("MaxPool", ["r2"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p2"], ["f"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f", "fc1.w", "fc1.b"], ["g1"], name="fc1", transB=1),
        helper.make_node("Relu", ["g1"], ["r3"], name="relu3"),
        helper.make_node("Gemm", ["r3", "fc2.w", "fc2.b"], ["g2"], name="fc2", transB=1),
        helper.make_node("Relu", ["g2"], ["r4"], name="relu4"),
        helper.make_node("Gemm", ["r4", "fc3.w", "fc3.b"], ["logits"], name="fc3", transB=1),
        helper.make_node("Softmax", ["logits"], ["prob"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "lenet",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 1, 28, 28])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="swflow-example")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, os.path.join(out, "model.onnx"))

    x = rng.random((1, 1, 28, 28), dtype=np.float32)
    np.save(os.path.join(out, "input.npy"), x)
    (prob,) = ReferenceEvaluator(model).run(None, {"input": x})
    np.save(os.path.join(out, "expected_prob.npy"), prob)
    print(f"wrote {out}: prob = {np.round(prob.ravel(), 4)}")


if __name__ == "__main__":
    main()
