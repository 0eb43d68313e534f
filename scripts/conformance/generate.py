"""Regenerates the ONNX conformance data swflow tests against.

Writes, under the folder given as the only argument:
  node/<test>/model.onnx, node/<test>/test_data_set_0/{input,output}_<k>.pb
      the ONNX backend node tests, made by onnx.backend.test.case.node.collect_testcases()
  node/legacy_opset<k>_<test>/...
      node tests converted to the older opset k (9 or 11) by onnx's version converter, kept
      only when onnxruntime reproduces the expected outputs of the converted model; they keep
      the older versions of ops (attribute forms of later inputs, ...) covered
  node/retyped_<test>/...
      copies of the node tests of RETYPED_OPS, whose backend tests use only element types
      swflow does not support (double data with int32 axes), with double tensors made float
      and int32 ones int64; their expected outputs come from onnx's reference evaluator, and
      they are kept only when onnxruntime agrees
  node/index.tsv
      one line per node test: name, op type under test, ai.onnx opset, element types used
      (ONNX type names, comma-separated), op types in the graph (comma-separated)
  node/onnxruntime.tsv
      one line per node test: name, and whether onnxruntime (CPU) reproduces its expected
      outputs within the project tolerance (pass, fail, or error with the first line of the
      message)
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
import onnxruntime as ort
from onnx import TensorProto, numpy_helper, version_converter
from onnx.reference import ReferenceEvaluator

ort.set_default_logger_severity(3)

# The project tolerance (frontend/src/tolerance.rs): |got - want| <= ATOL + RTOL * |want|.
RTOL = 1e-3
ATOL = 1e-7
# Older opsets the legacy copies of the node tests are converted to.
LEGACY_OPSETS = (9, 11)
# Ops whose backend node tests all use element types outside swflow's (see retyped_copy).
RETYPED_OPS = ("CumSum",)
# Element types retyped copies replace, and what with.
RETYPE = {TensorProto.DOUBLE: TensorProto.FLOAT, TensorProto.INT32: TensorProto.INT64}

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


def read_data_set(folder, model):
    """The stored inputs (by graph input name) and expected outputs of a test folder."""
    data = os.path.join(folder, "test_data_set_0")

    def load(prefix):
        values = []
        while os.path.exists(os.path.join(data, f"{prefix}_{len(values)}.pb")):
            proto = TensorProto()
            with open(os.path.join(data, f"{prefix}_{len(values)}.pb"), "rb") as f:
                proto.ParseFromString(f.read())
            values.append(numpy_helper.to_array(proto))
        return values

    inputs = dict(zip((vi.name for vi in model.graph.input), load("input")))
    return inputs, load("output")


def matches(got, want):
    """Whether `got` equals `want` within the project tolerance (exactly for non-floats)."""
    got = np.asarray(got)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if want.dtype.kind != "f":
        return bool(np.array_equal(got, want))
    return bool(np.allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True))


def onnxruntime_result(model, folder):
    """'pass', 'fail' or 'error: ...' for onnxruntime on the test in `folder`."""
    try:
        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        inputs, expected = read_data_set(folder, model)
        outputs = session.run(None, inputs)
    except Exception as e:  # onnxruntime raises many exception types for unsupported models
        return "error: " + (str(e).strip().splitlines() or ["?"])[0][:200]
    ok = len(outputs) == len(expected) and all(matches(g, w) for g, w in zip(outputs, expected))
    return "pass" if ok else "fail"


def model_opset(model):
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)


def write_case(root, name, model, inputs, outputs):
    folder = os.path.join(root, name)
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data)
    with open(os.path.join(folder, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    for j, value in enumerate(inputs):
        write_tensor(os.path.join(data, f"input_{j}.pb"), value, model.graph.input[j].name)
    for j, value in enumerate(outputs):
        write_tensor(os.path.join(data, f"output_{j}.pb"), value, model.graph.output[j].name)
    return folder


def legacy_copy(model, opset):
    """`model` converted to `opset`, or None when onnx's converter cannot do it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            converted = version_converter.convert_version(model, opset)
        onnx.checker.check_model(converted)
    except Exception:  # the converter raises a bare RuntimeError for unsupported adapters
        return None
    return converted


def retyped_copy(model, inputs):
    """`model` with double tensors made float and int32 ones int64, its inputs converted the
    same way, and the outputs onnx's reference evaluator computes for them; or None when the
    model has initializers or other element types."""
    if model.graph.initializer:
        return None
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for vi in list(copy.graph.input) + list(copy.graph.output):
        t = vi.type.tensor_type
        t.elem_type = RETYPE.get(t.elem_type, t.elem_type)
    np_type = {TensorProto.FLOAT: np.float32, TensorProto.INT64: np.int64}
    converted = []
    for vi, value in zip(copy.graph.input, inputs):
        kind = np_type.get(vi.type.tensor_type.elem_type)
        if kind is None:
            return None
        converted.append(np.asarray(value).astype(kind))
    feeds = {vi.name: v for vi, v in zip(copy.graph.input, converted)}
    outputs = ReferenceEvaluator(copy).run(None, feeds)
    return copy, converted, outputs


def write_node_tests(root):
    os.makedirs(root)
    rows = []
    runtime = []
    for case, op_type in collect_node_cases():
        model = case.model
        graph = model.graph
        if not all(is_tensor(vi) for vi in list(graph.input) + list(graph.output)):
            rows.append((case.name, op_type, "-", "NON_TENSOR", ""))
            continue
        inputs, outputs = case.data_sets[0]
        folder = write_case(root, case.name, model, inputs, outputs)
        opset = model_opset(model)
        types = ",".join(elem_types(model))
        ops = ",".join(sorted({n.op_type for n in graph.node}))
        rows.append((case.name, op_type, str(opset or "-"), types, ops))
        runtime.append((case.name, onnxruntime_result(model, folder)))
        if op_type in RETYPED_OPS:
            retyped = retyped_copy(model, inputs)
            if retyped is not None:
                copy, new_inputs, new_outputs = retyped
                name = f"retyped_{case.name}"
                folder = write_case(root, name, copy, new_inputs, new_outputs)
                verdict = onnxruntime_result(copy, folder)
                if verdict == "pass":
                    copy_ops = ",".join(sorted({n.op_type for n in copy.graph.node}))
                    rows.append((name, op_type, str(opset), ",".join(elem_types(copy)), copy_ops))
                    runtime.append((name, verdict))
                else:
                    shutil.rmtree(folder)
        for legacy in LEGACY_OPSETS:
            if opset is None or opset <= legacy:
                continue
            converted = legacy_copy(model, legacy)
            if converted is None:
                continue
            name = f"legacy_opset{legacy}_{case.name}"
            folder = write_case(root, name, converted, inputs, outputs)
            verdict = onnxruntime_result(converted, folder)
            if verdict != "pass":
                # Only conversions onnxruntime confirms are kept: the converter is not the
                # thing under test.
                shutil.rmtree(folder)
                continue
            rows.append((name, op_type, str(legacy), types, ",".join(sorted({n.op_type for n in converted.graph.node}))))
            runtime.append((name, verdict))
    rows.sort()
    runtime.sort()
    with open(os.path.join(root, "index.tsv"), "w") as f:
        f.write("# name\top_type\topset\telem_types\tgraph_ops\n")
        for row in rows:
            f.write("\t".join(row) + "\n")
    with open(os.path.join(root, "onnxruntime.tsv"), "w") as f:
        f.write(f"# onnxruntime {ort.__version__}: name\tverdict\n")
        for row in runtime:
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
    print(
        f"onnx {onnx.__version__}, onnxruntime {ort.__version__}: {count} node tests "
        f"and {len(LIGHT_MODELS)} light models in {out}"
    )


if __name__ == "__main__":
    main()
