"""The digits example: a small classifier of scikit-learn's 8x8 digits, trained by swflow's
generated program and, side by side, by jax with the same initial weights, batches, order
and PyTorch update rule.

  digits.py make OUT_DIR [EPOCHS]   writes OUT_DIR/model.onnx, the data set and jax's run:
      train_x.npy, train_labels.npy  48 batches of 32 digits (pixels scaled to [0, 1]), after
                                     one seeded shuffle of the data set
      test_x.npy, test_labels.npy    the remaining 261 digits
      reference/losses.npy           each step's loss (before its update), float64
      reference/params/*.npy         the final parameters
  digits.py compare OUT_DIR RUN_DIR  prints the two loss curves per epoch, the largest
      per-step relative difference, and the test accuracy of both trained models; exits 1
      when the runs differ by more than the project's model tolerance

The optimizer is SGD with momentum 0.9 and learning rate 0.05 (swflow: --optimizer momentum
--lr 0.05).
"""

import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from sklearn.datasets import load_digits

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

BATCH = 32
TRAIN_BATCHES = 48
HIDDEN = 32
LR = 0.05
MOMENTUM = 0.9
DEFAULT_EPOCHS = 10
# The project's tolerance for whole models against another runtime (frontend/src/tolerance.rs).
RTOL = 1e-3
MODEL_ATOL_SCALE = 1e-4


def data():
    digits = load_digits()
    # One seeded shuffle, so that the held-out digits come from the same writers; training then
    # takes the batches in file order.
    order = np.random.default_rng(7).permutation(len(digits.target))
    x = (digits.data[order] / 16.0).astype(np.float32)
    y = digits.target[order].astype(np.int64)
    n = BATCH * TRAIN_BATCHES
    return x[:n], y[:n], x[n:], y[n:]


def initial_params():
    """PyTorch's nn.Linear initialisation: uniform in +-1/sqrt(fan_in), seeded."""
    rng = np.random.default_rng(2026)
    params = {}
    for name, (out, inp) in {"fc1": (HIDDEN, 64), "fc2": (10, HIDDEN)}.items():
        bound = 1.0 / np.sqrt(inp)
        params[f"{name}.w"] = rng.uniform(-bound, bound, (out, inp)).astype(np.float32)
        params[f"{name}.b"] = rng.uniform(-bound, bound, out).astype(np.float32)
    return params


def forward(p, x):
    h = jax.nn.relu(x @ p["fc1.w"].T + p["fc1.b"])
    return h @ p["fc2.w"].T + p["fc2.b"]


def loss_fn(p, x, y):
    logp = jax.nn.log_softmax(forward(p, x), axis=1)
    return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))


def save_model(path, params):
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.w", "fc1.b"], ["h"], transB=1),
        helper.make_node("Relu", ["h"], ["a"]),
        helper.make_node("Gemm", ["a", "fc2.w", "fc2.b"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "digits_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [BATCH, 64])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [BATCH, 10])],
        [numpy_helper.from_array(v, k) for k, v in params.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)


def make(out, epochs):
    os.makedirs(os.path.join(out, "reference", "params"), exist_ok=True)
    xtr, ytr, xte, yte = data()
    params = initial_params()
    save_model(os.path.join(out, "model.onnx"), params)
    for name, v in [("train_x", xtr), ("train_labels", ytr), ("test_x", xte), ("test_labels", yte)]:
        np.save(os.path.join(out, f"{name}.npy"), v)
    p = {k: jnp.asarray(v, dtype=jnp.float64) for k, v in params.items()}
    buf = {}
    losses = []
    grad = jax.jit(jax.value_and_grad(loss_fn))
    for _ in range(epochs):
        for b in range(TRAIN_BATCHES):
            sl = slice(b * BATCH, (b + 1) * BATCH)
            value, g = grad(p, jnp.asarray(xtr[sl], dtype=jnp.float64), jnp.asarray(ytr[sl]))
            losses.append(float(value))
            # torch.optim.SGD(momentum=0.9): the first buffer is the gradient.
            buf = {k: g[k] if k not in buf else MOMENTUM * buf[k] + g[k] for k in p}
            p = {k: p[k] - LR * buf[k] for k in p}
    np.save(os.path.join(out, "reference", "losses.npy"), np.asarray(losses))
    for k, v in p.items():
        np.save(os.path.join(out, "reference", "params", f"{k}.npy"), np.asarray(v))
    with open(os.path.join(out, "reference", "config.json"), "w") as f:
        json.dump({"optimizer": "momentum", "lr": LR, "momentum": MOMENTUM, "epochs": epochs, "batch": BATCH}, f, indent=2)
    print(f"digits: {len(losses)} steps, jax loss {losses[0]:.6f} -> {losses[-1]:.6f}")


def accuracy(params, x, y):
    correct = 0
    for start in range(0, len(x), BATCH):
        logits = forward({k: jnp.asarray(v, dtype=jnp.float64) for k, v in params.items()}, jnp.asarray(x[start:start + BATCH], dtype=jnp.float64))
        correct += int(np.sum(np.argmax(np.asarray(logits), axis=1) == y[start:start + BATCH]))
    return correct / len(x)


def compare(out, run):
    want = np.load(os.path.join(out, "reference", "losses.npy"))
    got = np.load(os.path.join(run, "losses.npy")).astype(np.float64)
    if got.shape != want.shape:
        print(f"swflow ran {got.shape[0]} steps, jax {want.shape[0]}")
        return 1
    print("epoch  swflow (C, emulator)   jax (float64)   largest relative difference in the epoch")
    steps = TRAIN_BATCHES
    for e in range(len(want) // steps):
        a, b = got[e * steps:(e + 1) * steps], want[e * steps:(e + 1) * steps]
        print(f"{e + 1:5d}  {a.mean():20.6f}   {b.mean():13.6f}   {np.max(np.abs(a - b) / np.abs(b)):.2e}")
    worst = float(np.max(np.abs(got - want) / np.abs(want)))
    _, _, xte, yte = data()
    with open(os.path.join(run, "params.json")) as f:
        index = json.load(f)
    mine = {k: np.load(os.path.join(run, v)) for k, v in index.items()}
    theirs = {k: np.load(os.path.join(out, "reference", "params", f"{k}.npy")) for k in index}
    print(f"steps {len(got)}; loss {got[0]:.6f} -> {got[-1]:.6f}; largest per-step relative difference {worst:.2e}")
    print(f"test accuracy ({len(yte)} digits): swflow {accuracy(mine, xte, yte):.4f}, jax {accuracy(theirs, xte, yte):.4f}")
    ok = bool(np.all(np.abs(got - want) <= MODEL_ATOL_SCALE * np.max(np.abs(want)) + RTOL * np.abs(want)))
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else DEFAULT_EPOCHS)
    elif len(sys.argv) == 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    else:
        print(__doc__)
        sys.exit(2)
