"""Small training models as ONNX files, with reference losses and gradients from jax.grad.

Usage: models.py OUT_DIR

Each model is written twice from the same parameters: as ONNX nodes (what swflow compiles)
and as a JAX function (the reference), evaluated in float64. For each model, OUT_DIR/<name>/
holds:
  model.onnx         the model; its float initializers are the parameters, except batch
                     normalization's running statistics and Clip's bounds
  case.json          {"loss": "mse" | "cross-entropy", "inputs": {input name: file}}
  x.npy, labels.npy  the batch and its labels
  reference/         loss.npy and grad/<parameter>.npy (float64), gradients.json naming them
and OUT_DIR/mlp/train/ holds a training set (x.npy, labels.npy: batches of the MLP's batch
size stacked) and, per optimizer, the reference training on it with PyTorch's update rules:
<optimizer>/config.json, losses.npy (each step's loss before its update) and params/;
OUT_DIR/bn_train/ does the same for batch normalisation in training mode (see bn_training),
and OUT_DIR/dropout_train/ for dropout in training mode (see dropout_training).
"""

import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

OPSET = 20


class Model:
    """An ONNX graph under construction, with its parameters and constant buffers."""

    def __init__(self, name, seed):
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.params = {}
        self.buffers = {}
        self.counter = 0

    def param(self, name, shape, fan_in=None, value=None):
        if value is None:
            scale = 1.0 / np.sqrt(fan_in if fan_in else 1)
            value = self.rng.standard_normal(shape) * scale
        self.params[name] = np.asarray(value, dtype=np.float32)
        return name

    def buffer(self, name, value):
        self.buffers[name] = np.asarray(value)
        return name

    def node(self, op, inputs, **attrs):
        self.counter += 1
        out = f"{op.lower()}_{self.counter}"
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def constant(self, value):
        self.counter += 1
        out = f"const_{self.counter}"
        t = numpy_helper.from_array(np.asarray(value), out)
        self.nodes.append(helper.make_node("Constant", [], [out], name=out, value=t))
        return out

    def save(self, path, x, output, output_shape):
        inits = [numpy_helper.from_array(v, k) for k, v in {**self.params, **self.buffers}.items()]
        graph = helper.make_graph(
            self.nodes,
            self.name,
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
            [helper.make_tensor_value_info(output, TensorProto.FLOAT, list(output_shape))],
            inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        onnx.checker.check_model(model, full_check=True)
        onnx.save(model, path)


# JAX building blocks (float64), written from the ONNX operator definitions.

def conv(x, w, b=None, stride=1, pad=0, groups=1):
    y = lax.conv_general_dilated(
        x, w, (stride, stride), [(pad, pad), (pad, pad)],
        feature_group_count=groups, dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return y if b is None else y + b[None, :, None, None]


def max_pool(x, k, s, pad=0):
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, k, k), (1, 1, s, s),
                             [(0, 0), (0, 0), (pad, pad), (pad, pad)])


def avg_pool(x, k, s):
    return lax.reduce_window(x, 0.0, lax.add, (1, 1, k, k), (1, 1, s, s), "VALID") / (k * k)


def batch_norm(x, g, b, mean, var, eps=1e-5):
    shape = (1, -1, 1, 1)
    return g.reshape(shape) * (x - mean.reshape(shape)) / jnp.sqrt(var.reshape(shape) + eps) + b.reshape(shape)


def layer_norm(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / jnp.sqrt(var + eps) * g + b


def gemm(x, w, b):
    return x @ w.T + b


def cross_entropy(logits, labels):
    logp = jax.nn.log_softmax(logits, axis=1)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))


# The models: each returns (Model, x, labels, loss kind, output name, output shape, forward),
# where forward(params, buffers, x) is the JAX prediction.

def mlp():
    m = Model("mlp", 1)
    m.param("fc1.w", (32, 64), 64)
    m.param("fc1.b", (32,), 64)
    m.param("fc2.w", (24, 32), 32)
    m.param("fc2.b", (24,), 32)
    m.param("fc3.w", (10, 24), 24)
    m.param("fc3.b", (10,), 24)
    h = m.node("Gemm", ["x", "fc1.w", "fc1.b"], transB=1)
    h = m.node("Relu", [h])
    h = m.node("Gemm", [h, "fc2.w", "fc2.b"], transB=1)
    h = m.node("Sigmoid", [h])
    y = m.node("Gemm", [h, "fc3.w", "fc3.b"], transB=1)

    def forward(p, _b, x):
        h = jax.nn.relu(gemm(x, p["fc1.w"], p["fc1.b"]))
        h = jax.nn.sigmoid(gemm(h, p["fc2.w"], p["fc2.b"]))
        return gemm(h, p["fc3.w"], p["fc3.b"])

    x = m.rng.standard_normal((8, 64)).astype(np.float32)
    labels = m.rng.integers(0, 10, 8)
    return m, x, labels, "cross-entropy", y, (8, 10), forward


def lenet():
    m = Model("lenet", 2)
    m.param("c1.w", (6, 1, 5, 5), 25)
    m.param("c1.b", (6,), 25)
    m.param("c2.w", (16, 6, 5, 5), 150)
    m.param("c2.b", (16,), 150)
    m.param("f1.w", (120, 400), 400)
    m.param("f1.b", (120,), 400)
    m.param("f2.w", (84, 120), 120)
    m.param("f2.b", (84,), 120)
    m.param("f3.w", (10, 84), 84)
    m.param("f3.b", (10,), 84)
    h = m.node("Conv", ["x", "c1.w", "c1.b"], pads=[2, 2, 2, 2])
    h = m.node("Relu", [h])
    h = m.node("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = m.node("Conv", [h, "c2.w", "c2.b"])
    h = m.node("Relu", [h])
    h = m.node("AveragePool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = m.node("Flatten", [h])
    h = m.node("Relu", [m.node("Gemm", [h, "f1.w", "f1.b"], transB=1)])
    h = m.node("Relu", [m.node("Gemm", [h, "f2.w", "f2.b"], transB=1)])
    y = m.node("Gemm", [h, "f3.w", "f3.b"], transB=1)

    def forward(p, _b, x):
        h = max_pool(jax.nn.relu(conv(x, p["c1.w"], p["c1.b"], pad=2)), 2, 2)
        h = avg_pool(jax.nn.relu(conv(h, p["c2.w"], p["c2.b"])), 2, 2)
        h = h.reshape(h.shape[0], -1)
        h = jax.nn.relu(gemm(h, p["f1.w"], p["f1.b"]))
        h = jax.nn.relu(gemm(h, p["f2.w"], p["f2.b"]))
        return gemm(h, p["f3.w"], p["f3.b"])

    x = m.rng.standard_normal((4, 1, 28, 28)).astype(np.float32)
    labels = m.rng.integers(0, 10, 4)
    return m, x, labels, "cross-entropy", y, (4, 10), forward


def bn_params(m, name, c):
    m.param(f"{name}.g", (c,), value=1.0 + 0.1 * m.rng.standard_normal(c))
    m.param(f"{name}.b", (c,), value=0.1 * m.rng.standard_normal(c))
    m.buffer(f"{name}.mean", (0.1 * m.rng.standard_normal(c)).astype(np.float32))
    m.buffer(f"{name}.var", (1.0 + 0.2 * m.rng.random(c)).astype(np.float32))
    return [f"{name}.g", f"{name}.b", f"{name}.mean", f"{name}.var"]


def bn_jax(p, b, name, x):
    return batch_norm(x, p[f"{name}.g"], p[f"{name}.b"], b[f"{name}.mean"], b[f"{name}.var"])


def residual_bn():
    m = Model("residual_bn", 3)
    c = 8
    m.param("conv_a.w", (c, c, 3, 3), 9 * c)
    m.param("conv_b.w", (c, c, 3, 3), 9 * c)
    bn_a = bn_params(m, "bn_a", c)
    bn_b = bn_params(m, "bn_b", c)
    m.param("fc.w", (5, c), c)
    m.param("fc.b", (5,), c)
    h = m.node("Conv", ["x", "conv_a.w"], pads=[1, 1, 1, 1])
    h = m.node("Relu", [m.node("BatchNormalization", [h] + bn_a)])
    h = m.node("Conv", [h, "conv_b.w"], pads=[1, 1, 1, 1])
    h = m.node("BatchNormalization", [h] + bn_b)
    h = m.node("Relu", [m.node("Add", [h, "x"])])
    h = m.node("MaxPool", [h], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    h = m.node("Flatten", [m.node("GlobalAveragePool", [h])])
    y = m.node("Gemm", [h, "fc.w", "fc.b"], transB=1)

    def forward(p, b, x):
        h = jax.nn.relu(bn_jax(p, b, "bn_a", conv(x, p["conv_a.w"], pad=1)))
        h = bn_jax(p, b, "bn_b", conv(h, p["conv_b.w"], pad=1))
        h = max_pool(jax.nn.relu(h + x), 3, 2, pad=1)
        return gemm(h.mean(axis=(2, 3)), p["fc.w"], p["fc.b"])

    x = m.rng.standard_normal((2, c, 8, 8)).astype(np.float32)
    labels = m.rng.integers(0, 5, 2)
    return m, x, labels, "cross-entropy", y, (2, 5), forward


def depthwise_separable():
    m = Model("depthwise_separable", 4)
    c, k = 8, 16
    m.param("dw.w", (c, 1, 3, 3), 9)
    m.param("dw.b", (c,), 9)
    bn_dw = bn_params(m, "bn_dw", c)
    m.buffer("relu6.min", np.array(0.0, dtype=np.float32))
    m.buffer("relu6.max", np.array(6.0, dtype=np.float32))
    m.param("pw.w", (k, c, 1, 1), c)
    bn_pw = bn_params(m, "bn_pw", k)
    m.param("fc.w", (4, k), k)
    m.param("fc.b", (4,), k)
    h = m.node("Conv", ["x", "dw.w", "dw.b"], group=c, strides=[2, 2], pads=[1, 1, 1, 1])
    h = m.node("BatchNormalization", [h] + bn_dw)
    h = m.node("Clip", [h, "relu6.min", "relu6.max"])
    h = m.node("Conv", [h, "pw.w"])
    h = m.node("Relu", [m.node("BatchNormalization", [h] + bn_pw)])
    h = m.node("Flatten", [m.node("GlobalAveragePool", [h])])
    y = m.node("Gemm", [h, "fc.w", "fc.b"], transB=1)

    def forward(p, b, x):
        h = conv(x, p["dw.w"], p["dw.b"], stride=2, pad=1, groups=c)
        h = jnp.clip(bn_jax(p, b, "bn_dw", h), 0.0, 6.0)
        h = jax.nn.relu(bn_jax(p, b, "bn_pw", conv(h, p["pw.w"])))
        return gemm(h.mean(axis=(2, 3)), p["fc.w"], p["fc.b"])

    x = (2.0 * m.rng.standard_normal((2, c, 10, 10))).astype(np.float32)
    labels = m.rng.integers(0, 4, 2)
    return m, x, labels, "cross-entropy", y, (2, 4), forward


def transformer_block():
    m = Model("transformer_block", 5)
    n, t, d, heads, ff = 2, 6, 16, 2, 32
    dh = d // heads
    m.param("ln1.g", (d,), value=1.0 + 0.1 * m.rng.standard_normal(d))
    m.param("ln1.b", (d,), value=0.1 * m.rng.standard_normal(d))
    # The keys have no bias: it shifts all of a query's scores by the same amount, which the
    # softmax cancels, so its gradient is zero in exact arithmetic and only rounding noise in
    # any implementation, with no relative error to measure.
    for w in ["q", "k", "v", "o"]:
        m.param(f"w{w}", (d, d), d)
        if w != "k":
            m.param(f"b{w}", (d,), d)
    m.param("ln2.g", (d,), value=1.0 + 0.1 * m.rng.standard_normal(d))
    m.param("ln2.b", (d,), value=0.1 * m.rng.standard_normal(d))
    m.param("w1", (d, ff), d)
    m.param("b1", (ff,), d)
    m.param("w2", (ff, d), ff)
    m.param("b2", (d,), ff)
    heads_shape = m.constant(np.array([n, t, heads, dh], dtype=np.int64))
    model_shape = m.constant(np.array([n, t, d], dtype=np.int64))
    scale = m.constant(np.array(1.0 / np.sqrt(dh), dtype=np.float32))

    def proj(h, w):
        z = m.node("MatMul", [h, f"w{w}"])
        return z if w == "k" else m.node("Add", [z, f"b{w}"])

    h = m.node("LayerNormalization", ["x", "ln1.g", "ln1.b"], axis=-1)
    q = m.node("Transpose", [m.node("Reshape", [proj(h, "q"), heads_shape])], perm=[0, 2, 1, 3])
    kt = m.node("Transpose", [m.node("Reshape", [proj(h, "k"), heads_shape])], perm=[0, 2, 3, 1])
    v = m.node("Transpose", [m.node("Reshape", [proj(h, "v"), heads_shape])], perm=[0, 2, 1, 3])
    s = m.node("Softmax", [m.node("Mul", [m.node("MatMul", [q, kt]), scale])], axis=-1)
    a = m.node("Transpose", [m.node("MatMul", [s, v])], perm=[0, 2, 1, 3])
    r1 = m.node("Add", ["x", proj(m.node("Reshape", [a, model_shape]), "o")])
    h = m.node("LayerNormalization", [r1, "ln2.g", "ln2.b"], axis=-1)
    h = m.node("Gelu", [m.node("Add", [m.node("MatMul", [h, "w1"]), "b1"])])
    y = m.node("Add", [r1, m.node("Add", [m.node("MatMul", [h, "w2"]), "b2"])])

    def forward(p, _b, x):
        h = layer_norm(x, p["ln1.g"], p["ln1.b"])

        def split(z):
            return z.reshape(n, t, heads, dh).transpose(0, 2, 1, 3)

        q, k, v = split(h @ p["wq"] + p["bq"]), split(h @ p["wk"]), split(h @ p["wv"] + p["bv"])
        s = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / np.sqrt(dh), axis=-1)
        a = (s @ v).transpose(0, 2, 1, 3).reshape(n, t, d)
        r1 = x + a @ p["wo"] + p["bo"]
        h = layer_norm(r1, p["ln2.g"], p["ln2.b"])
        h = jax.nn.gelu(h @ p["w1"] + p["b1"], approximate=False)
        return r1 + h @ p["w2"] + p["b2"]

    x = m.rng.standard_normal((n, t, d)).astype(np.float32)
    labels = m.rng.standard_normal((n, t, d)).astype(np.float32)
    return m, x, labels, "mse", y, (n, t, d), forward


MODELS = [mlp, lenet, residual_bn, depthwise_separable, transformer_block]

# Optimizer runs on the MLP: name -> settings, with PyTorch's defaults for the rest.
OPTIMIZERS = {
    "sgd": {"optimizer": "sgd", "lr": 0.1},
    "momentum": {"optimizer": "momentum", "lr": 0.05, "momentum": 0.9, "weight_decay": 1e-3},
    "nesterov": {"optimizer": "momentum", "lr": 0.05, "momentum": 0.9, "nesterov": True},
    "adam": {"optimizer": "adam", "lr": 1e-2, "weight_decay": 1e-3},
    "adamw": {"optimizer": "adamw", "lr": 1e-2, "weight_decay": 1e-2},
}
TRAIN_BATCHES = 4
TRAIN_EPOCHS = 2


def torch_update(cfg, params, grads, state, t):
    """One step of torch.optim.SGD / Adam / AdamW (their single-tensor update rules)."""
    kind = cfg["optimizer"]
    lr = cfg["lr"]
    wd = cfg.get("weight_decay", 0.0 if kind != "adamw" else 1e-2)
    new_params, new_state = {}, {}
    for name, p in params.items():
        g = grads[name]
        if kind in ("sgd", "momentum"):
            if wd:
                g = g + wd * p
            mu = cfg.get("momentum", 0.0 if kind == "sgd" else 0.9)
            if mu:
                buf = g if t == 1 else mu * state[name] + g
                new_state[name] = buf
                g = g + mu * buf if cfg.get("nesterov") else buf
            new_params[name] = p - lr * g
        else:
            b1, b2, eps = cfg.get("beta1", 0.9), cfg.get("beta2", 0.999), cfg.get("eps", 1e-8)
            if wd and kind == "adamw":
                p = p * (1 - lr * wd)
            elif wd:
                g = g + wd * p
            m, v = state.get(name, (jnp.zeros_like(p), jnp.zeros_like(p)))
            m = m + (1 - b1) * (g - m)
            v = b2 * v + (1 - b2) * g * g
            step_size = lr / (1 - b1 ** t)
            denom = jnp.sqrt(v) / np.sqrt(1 - b2 ** t) + eps
            new_params[name] = p - step_size * m / denom
            new_state[name] = (m, v)
    return new_params, new_state


def save_training_set(out, m, xs, labels, batch, y):
    """Model `m` (batch `batch`, output `y` of 5 classes) and its training set under
    OUT/<name>/: model.onnx, train/x.npy and train/labels.npy; returns the folder."""
    d = os.path.join(out, m.name)
    os.makedirs(os.path.join(d, "train"), exist_ok=True)
    m.save(os.path.join(d, "model.onnx"), xs[:batch], y, (batch, 5))
    np.save(os.path.join(d, "train", "x.npy"), xs)
    np.save(os.path.join(d, "train", "labels.npy"), labels)
    return d


def write_run(run, cfg, losses, tensors):
    """A reference training run in folder `run`: config.json, losses.npy and params/."""
    os.makedirs(os.path.join(run, "params"), exist_ok=True)
    with open(os.path.join(run, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
    np.save(os.path.join(run, "losses.npy"), np.asarray(losses))
    for k, v in tensors.items():
        np.save(os.path.join(run, "params", f"{k}.npy"), np.asarray(v))


def bn_training(out):
    """A convolution, batch normalisation in training mode (batch statistics; its updated
    running statistics are not graph outputs, so the importer must find them), ReLU and a
    classifier, trained with SGD for two epochs of three batches: OUT/bn_train/ holds the
    model, train/x.npy and train/labels.npy, and train/sgd/ jax's run, whose params/ include
    the final running statistics."""
    m = Model("bn_train", 6)
    m.param("c.w", (4, 3, 3, 3), 27)
    m.param("bn.g", (4,), value=1.0 + 0.1 * m.rng.standard_normal(4))
    m.param("bn.b", (4,), value=0.1 * m.rng.standard_normal(4))
    m.buffer("bn.mean", (0.1 * m.rng.standard_normal(4)).astype(np.float32))
    m.buffer("bn.var", (1.0 + 0.2 * m.rng.random(4)).astype(np.float32))
    m.param("fc.w", (5, 4), 4)
    m.param("fc.b", (5,), 4)
    h = m.node("Conv", ["x", "c.w"], pads=[1, 1, 1, 1])
    m.nodes.append(helper.make_node(
        "BatchNormalization", [h, "bn.g", "bn.b", "bn.mean", "bn.var"], ["bn_y", "bn.mean_next", "bn.var_next"],
        name="bn", training_mode=1, momentum=0.8))
    h = "bn_y"
    h = m.node("Flatten", [m.node("GlobalAveragePool", [m.node("Relu", [h])])])
    y = m.node("Gemm", [h, "fc.w", "fc.b"], transB=1)
    batch, batches, momentum, eps = 4, 3, 0.8, 1e-5
    xs = m.rng.standard_normal((batches * batch, 3, 6, 6)).astype(np.float32)
    labels = m.rng.integers(0, 5, batches * batch)
    d = save_training_set(out, m, xs, labels, batch, y)

    def objective(p, running, x, labels):
        h = conv(x, p["c.w"], pad=1)
        mean, var = h.mean(axis=(0, 2, 3)), h.var(axis=(0, 2, 3))
        h = batch_norm(h, p["bn.g"], p["bn.b"], mean, var, eps)
        logits = gemm(jax.nn.relu(h).mean(axis=(2, 3)), p["fc.w"], p["fc.b"])
        new = {"bn.mean": momentum * running["bn.mean"] + (1 - momentum) * mean,
               "bn.var": momentum * running["bn.var"] + (1 - momentum) * var}
        return cross_entropy(logits, labels), new

    cfg = {"optimizer": "sgd", "lr": 0.1, "epochs": 2}
    params = {k: jnp.asarray(v, dtype=jnp.float64) for k, v in m.params.items()}
    running = {k: jnp.asarray(v, dtype=jnp.float64) for k, v in m.buffers.items()}
    step = jax.value_and_grad(objective, has_aux=True)
    losses, t = [], 0
    for _ in range(cfg["epochs"]):
        for b in range(batches):
            x = jnp.asarray(xs[b * batch:(b + 1) * batch], dtype=jnp.float64)
            (value, running), grads = step(params, running, x, jnp.asarray(labels[b * batch:(b + 1) * batch]))
            losses.append(float(value))
            t += 1
            params, _ = torch_update(cfg, params, grads, {}, t)
    write_run(os.path.join(d, "train", "sgd"), cfg, losses, {**params, **running})
    print(f"bn_train trained with sgd: loss {losses[0]:.6f} -> {losses[-1]:.6f}")


GOLDEN = 0x9E3779B97F4A7C15
MASK64 = (1 << 64) - 1


def splitmix64(state):
    """One SplitMix64 step: the new state and the output."""
    state = (state + GOLDEN) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def dropout_noise(seed, step, stream, n):
    """The dropout noise swflow's training programs draw, written from its specification:
    the first SplitMix64 output from state seed + GOLDEN * (step + 1) seeds stream `stream`,
    whose state starts at that seed + GOLDEN * (stream + 1); each element is the next
    output's top 24 bits over 2^24."""
    _, step_seed = splitmix64((seed + GOLDEN * (step + 1)) & MASK64)
    state = (step_seed + GOLDEN * (stream + 1)) & MASK64
    out = np.empty(n)
    for k in range(n):
        state, r = splitmix64(state)
        out[k] = (r >> 40) / float(1 << 24)
    return out


def dropout_training(out):
    """An MLP with dropout in training mode between its layers, trained with SGD for two
    epochs of three batches with a fresh dropout mask every step (the noise of seed 0,
    stream 0): OUT/dropout_train/ holds the model, train/x.npy, train/labels.npy and
    train/sgd/ jax's run."""
    m = Model("dropout_train", 7)
    m.param("f1.w", (6, 8), 8)
    m.param("f1.b", (6,), 8)
    m.param("f2.w", (5, 6), 6)
    m.param("f2.b", (5,), 6)
    ratio = 0.3
    h = m.node("Relu", [m.node("Gemm", ["x", "f1.w", "f1.b"], transB=1)])
    h = m.node("Dropout", [h, m.constant(np.float32(ratio)), m.constant(np.bool_(True))])
    y = m.node("Gemm", [h, "f2.w", "f2.b"], transB=1)
    batch, batches = 4, 3
    xs = m.rng.standard_normal((batches * batch, 8)).astype(np.float32)
    labels = m.rng.integers(0, 5, batches * batch)
    d = save_training_set(out, m, xs, labels, batch, y)
    threshold = float(np.float32(ratio))

    def objective(p, keep, x, labels):
        h = jax.nn.relu(gemm(x, p["f1.w"], p["f1.b"]))
        h = jnp.where(keep, h, 0.0) / (1.0 - ratio)
        return cross_entropy(gemm(h, p["f2.w"], p["f2.b"]), labels)

    cfg = {"optimizer": "sgd", "lr": 0.1, "epochs": 2}
    params = {k: jnp.asarray(v, dtype=jnp.float64) for k, v in m.params.items()}
    step = jax.value_and_grad(objective)
    losses, t = [], 0
    for _ in range(cfg["epochs"]):
        for b in range(batches):
            keep = dropout_noise(0, t, 0, batch * 6).reshape(batch, 6) >= threshold
            x = jnp.asarray(xs[b * batch:(b + 1) * batch], dtype=jnp.float64)
            value, grads = step(params, jnp.asarray(keep), x, jnp.asarray(labels[b * batch:(b + 1) * batch]))
            losses.append(float(value))
            t += 1
            params, _ = torch_update(cfg, params, grads, {}, t)
    write_run(os.path.join(d, "train", "sgd"), cfg, losses, params)
    print(f"dropout_train trained with sgd: loss {losses[0]:.6f} -> {losses[-1]:.6f}")


def reference_training(out):
    """The MLP trained by each optimizer of OPTIMIZERS on TRAIN_BATCHES batches for
    TRAIN_EPOCHS epochs, in float64: OUT/mlp/train/<name>/losses.npy and params/<p>.npy."""
    m, _, _, loss, _, shape, forward = mlp()
    batch = shape[0]
    rng = np.random.default_rng(11)
    xs = rng.standard_normal((TRAIN_BATCHES * batch, 64)).astype(np.float32)
    labels = rng.integers(0, 10, TRAIN_BATCHES * batch)
    d = os.path.join(out, "mlp", "train")
    os.makedirs(d, exist_ok=True)
    np.save(os.path.join(d, "x.npy"), xs)
    np.save(os.path.join(d, "labels.npy"), labels)

    def objective(p, x, y):
        return cross_entropy(forward(p, {}, x), y)

    value_and_grad = jax.value_and_grad(objective)
    for name, cfg in OPTIMIZERS.items():
        params = {k: jnp.asarray(v, dtype=jnp.float64) for k, v in m.params.items()}
        state, losses, t = {}, [], 0
        for _ in range(TRAIN_EPOCHS):
            for b in range(TRAIN_BATCHES):
                x = jnp.asarray(xs[b * batch:(b + 1) * batch], dtype=jnp.float64)
                y = jnp.asarray(labels[b * batch:(b + 1) * batch])
                value, grads = value_and_grad(params, x, y)
                losses.append(float(value))
                t += 1
                params, state = torch_update(cfg, params, grads, state, t)
        write_run(os.path.join(d, name), {**cfg, "epochs": TRAIN_EPOCHS}, losses, params)
        print(f"mlp trained with {name}: loss {losses[0]:.6f} -> {losses[-1]:.6f}")


def main(out):
    for make in MODELS:
        m, x, labels, loss, output, shape, forward = make()
        d = os.path.join(out, m.name)
        os.makedirs(os.path.join(d, "reference", "grad"), exist_ok=True)
        m.save(os.path.join(d, "model.onnx"), x, output, shape)
        np.save(os.path.join(d, "x.npy"), x)
        np.save(os.path.join(d, "labels.npy"), labels)
        with open(os.path.join(d, "case.json"), "w") as f:
            json.dump({"loss": loss, "inputs": {"x": "x.npy"}}, f, indent=2)
        params = {k: jnp.asarray(v, dtype=jnp.float64) for k, v in m.params.items()}
        buffers = {k: jnp.asarray(v, dtype=jnp.float64) for k, v in m.buffers.items()}
        x64 = jnp.asarray(x, dtype=jnp.float64)

        def objective(p):
            pred = forward(p, buffers, x64)
            if loss == "mse":
                return jnp.mean((pred - jnp.asarray(labels, dtype=jnp.float64)) ** 2)
            return cross_entropy(pred, jnp.asarray(labels))

        value, grads = jax.value_and_grad(objective)(params)
        np.save(os.path.join(d, "reference", "loss.npy"), np.asarray(value))
        index = {}
        for name, g in grads.items():
            index[name] = f"grad/{name}.npy"
            np.save(os.path.join(d, "reference", index[name]), np.asarray(g))
        with open(os.path.join(d, "reference", "gradients.json"), "w") as f:
            json.dump(index, f, indent=2, sort_keys=True)
        print(f"{m.name}: loss {float(value):.6f}, {len(index)} gradients")
    reference_training(out)
    bn_training(out)
    dropout_training(out)


if __name__ == "__main__":
    main(sys.argv[1])
