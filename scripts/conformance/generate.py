"""Regenerates the ONNX conformance data swflow tests against.

Writes, under the folder given as the only argument:
  node/<test>/model.onnx, node/<test>/test_data_set_0/{input,output}_<k>.pb
      the ONNX backend node tests, made by onnx.backend.test.case.node.collect_testcases()
  node/index.tsv
      one line per node test: name, op type under test, ai.onnx opset, element types used
      (ONNX type names, comma-separated), op types in the graph (comma-separated)
  light/<model>/model.onnx, light/<model>/test_data_set_0/{input_0,output_0}.pb
      the light models shipped in the onnx wheel, with the input the ONNX backend runner
      feeds them (arange(n)/n) and their expected output
The output is deterministic for a given onnx version.
"""

import os
import shutil
import sys
import warnings

import numpy as np
import onnx
import onnx.backend.test.case.node as node_cases
from onnx import TensorProto, numpy_helper

LIGHT_MODELS = [
    "bvlc_alexnet",
    "densenet121",
    "inception_v1",
    "inception_v2",
    "resnet50",
    "shufflenet",
    "squeezenet",
    "vgg19",
    "zfnet512",
]


def collect_node_cases():
    """All node test cases, each paired with the op type its expect() call tested."""
    tested_op = {}
    original = node_cases.expect

    def expect(node_op, inputs, outputs, name, **kwargs):
        before = len(node_cases._NodeTestCases)
        original(node_op, inputs, outputs, name, **kwargs)
        for case in node_cases._NodeTestCases[before:]:
            tested_op[case.name] = node_op.op_type

    node_cases.expect = expect
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = node_cases.collect_testcases(None)
    # A few names are generated twice; as in onnx's own generator, the last one wins.
    by_name = {case.name: case for case in cases}
    return [(by_name[name], tested_op.get(name, "?")) for name in sorted(by_name)]


def is_tensor(value_info):
    return value_info.type.HasField("tensor_type")


def write_tensor(path, value, name):
    proto = value if isinstance(value, TensorProto) else numpy_helper.from_array(value, name)
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def elem_types(model):
    types = set()
    graph = model.graph
    for vi in list(graph.input) + list(graph.output):
        if is_tensor(vi):
            types.add(TensorProto.DataType.Name(vi.type.tensor_type.elem_type))
        else:
            types.add("NON_TENSOR")
    for t in graph.initializer:
        types.add(TensorProto.DataType.Name(t.data_type))
    return sorted(types)


def write_node_tests(root):
    os.makedirs(root)
    rows = []
    for case, op_type in collect_node_cases():
        model = case.model
        graph = model.graph
        if not all(is_tensor(vi) for vi in list(graph.input) + list(graph.output)):
            rows.append((case.name, op_type, "-", "NON_TENSOR", ""))
            continue
        folder = os.path.join(root, case.name)
        data = os.path.join(folder, "test_data_set_0")
        os.makedirs(data)
        with open(os.path.join(folder, "model.onnx"), "wb") as f:
            f.write(model.SerializeToString())
        inputs, outputs = case.data_sets[0]
        for j, value in enumerate(inputs):
            write_tensor(os.path.join(data, f"input_{j}.pb"), value, graph.input[j].name)
        for j, value in enumerate(outputs):
            write_tensor(os.path.join(data, f"output_{j}.pb"), value, graph.output[j].name)
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), "-")
        ops = sorted({n.op_type for n in graph.node})
        rows.append((case.name, op_type, str(opset), ",".join(elem_types(model)), ",".join(ops)))
    with open(os.path.join(root, "index.tsv"), "w") as f:
        f.write("# name\top_type\topset\telem_types\tgraph_ops\n")
        for row in rows:
            f.write("\t".join(row) + "\n")
    return len(rows)


def write_light_models(root):
    source = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    for name in LIGHT_MODELS:
        folder = os.path.join(root, name)
        data = os.path.join(folder, "test_data_set_0")
        os.makedirs(data)
        model_path = os.path.join(source, f"light_{name}.onnx")
        shutil.copyfile(model_path, os.path.join(folder, "model.onnx"))
        shutil.copyfile(
            os.path.join(source, f"light_{name}_output_0.pb"), os.path.join(data, "output_0.pb")
        )
        model = onnx.load(model_path)
        initializers = {t.name for t in model.graph.initializer}
        inputs = [vi for vi in model.graph.input if vi.name not in initializers]
        assert len(inputs) == 1, name
        # The input the ONNX backend runner generates for light models (random=False).
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in inputs[0].type.tensor_type.shape.dim)
        n = int(np.prod(shape))
        value = (np.arange(n).reshape(shape) / n).astype(np.float32)
        write_tensor(os.path.join(data, "input_0.pb"), value, inputs[0].name)


def main():
    out = sys.argv[1]
    if os.path.exists(out):
        shutil.rmtree(out)
    count = write_node_tests(os.path.join(out, "node"))
    write_light_models(os.path.join(out, "light"))
    print(f"onnx {onnx.__version__}: {count} node tests and {len(LIGHT_MODELS)} light models in {out}")


if __name__ == "__main__":
    main()
