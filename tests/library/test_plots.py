"""Tests of gradlab.plots: what is drawn is exactly what TensorFlow computes, labelled, and leak-free."""
from __future__ import annotations

import doctest

import keras
import matplotlib.pyplot as plt
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.axes import Axes
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

import gradlab
import gradlab.plots as gp

X = tf.constant(gp.DEFAULT_X)


def tape_values(fn, x=X):
    with tf.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    gradient = tape.gradient(y, x)
    return y.numpy(), (np.zeros(x.shape, x.dtype.as_numpy_dtype) if gradient is None else gradient.numpy())


def clipped_tanh(x):
    return tf.tanh(gradlab.clip_gradient(x, -0.25, 0.5))


@pytest.fixture(autouse=True)
def no_figure_leaks():
    before = plt.get_fignums()
    yield
    assert plt.get_fignums() == before, "a plotting function left a figure open in pyplot"


# --- values_and_gradients ----------------------------------------------------------------------------

@pytest.mark.parametrize("fn", [tf.tanh, tf.sin, clipped_tanh,
                                lambda x: gradlab.surrogate_step(x, 0.5),
                                lambda x: gradlab.straight_through(tf.round(x), x)])
def test_values_and_gradients_are_exactly_the_tapes(fn):
    forward, gradient = gp.values_and_gradients(fn)
    expected_forward, expected_gradient = tape_values(fn)
    np.testing.assert_array_equal(forward, expected_forward)
    np.testing.assert_array_equal(gradient, expected_gradient)


def test_values_and_gradients_keeps_the_grid_dtype_and_sends_zero_for_no_gradient():
    x = np.linspace(-1.0, 1.0, 11)  # float64
    forward, gradient = gp.values_and_gradients(tf.stop_gradient, x)
    assert forward.dtype == gradient.dtype == np.float64
    np.testing.assert_array_equal(forward, x)
    np.testing.assert_array_equal(gradient, np.zeros_like(x))


@pytest.mark.parametrize("fn, x, error, pattern", [
    ("tanh", None, TypeError, "fn must be callable"),
    (tf.reduce_sum, None, ValueError, "elementwise"),
    (lambda x: tf.cast(x > 0, tf.int32), None, TypeError, r"fn\(x\) must have a floating dtype"),
    (tf.tanh, [[0.0, 1.0]], ValueError, "x must be a 1-D grid"),
    (tf.tanh, [1.0], ValueError, "x must be a 1-D grid"),
    (tf.tanh, [0.0, np.inf], ValueError, "x must hold finite"),
    (tf.tanh, [0, 1], TypeError, "x must have a floating dtype"),
    (tf.tanh, "0 1", TypeError, "x must be a floating-point"),
])
def test_values_and_gradients_rejects_bad_input(fn, x, error, pattern):
    with pytest.raises(error, match=pattern):
        gp.values_and_gradients(fn, x)


# --- forward_and_gradient --------------------------------------------------------------------------

def line_by_label(fig: Figure, label: str):
    found = [line for ax in fig.axes for line in ax.get_lines() if line.get_label() == label]
    assert len(found) == 1, f"expected one line labelled {label!r}, found {len(found)}"
    return found[0]


def test_side_by_side_plots_the_modified_gradient_bold_and_the_plain_one_faint():
    fig = gp.forward_and_gradient(tf.tanh, clipped_tanh)
    assert isinstance(fig, Figure) and len(fig.axes) == 2
    forward_ax, gradient_ax = fig.axes
    assert forward_ax.get_title() == "forward pass: y = tanh(x)"
    assert gradient_ax.get_title() == "backward pass: gradient dy/dx"
    assert gradient_ax.get_ylabel() == "dy/dx" and forward_ax.get_xlabel() == "x"

    modified = line_by_label(fig, "gradient, modified")
    plain = line_by_label(fig, "gradient, plain")
    forward = line_by_label(fig, "forward tanh(x)")
    assert modified.axes is gradient_ax and plain.axes is gradient_ax and forward.axes is forward_ax
    np.testing.assert_array_equal(modified.get_ydata(), tape_values(clipped_tanh)[1])
    np.testing.assert_array_equal(plain.get_ydata(), tape_values(tf.tanh)[1])
    np.testing.assert_array_equal(forward.get_ydata(), tape_values(tf.tanh)[0])
    np.testing.assert_array_equal(modified.get_xdata(), gp.DEFAULT_X)
    # Faint and dashed versus bold and solid; the plain line is drawn first (underneath).
    assert plain.get_linestyle() == "--" and modified.get_linestyle() == "-"
    assert to_rgba(plain.get_color())[:3] == to_rgba("0.55")[:3] and plain.get_alpha() < 1
    assert modified.get_linewidth() > plain.get_linewidth()
    lines = gradient_ax.get_lines()
    assert lines.index(plain) < lines.index(modified)
    # Identical forward values are drawn once, and the legend names every curve.
    assert [line.get_label() for line in forward_ax.get_lines() if not line.get_label().startswith("_")] == ["forward tanh(x)"]
    legend_texts = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend_texts == ["gradient, plain", "forward tanh(x)", "gradient, modified"]


def test_a_forward_that_differs_is_drawn_beside_the_plain_one():
    fig = gp.forward_and_gradient(tf.identity, tf.round, name="q")
    np.testing.assert_array_equal(line_by_label(fig, "q(x) plain").get_ydata(), gp.DEFAULT_X)
    np.testing.assert_array_equal(line_by_label(fig, "forward q(x)").get_ydata(), np.round(gp.DEFAULT_X))


def test_without_modified_it_plots_the_function_and_its_gradient():
    fig = gp.forward_and_gradient(tf.sin, x=np.linspace(0, 1, 5, dtype=np.float32))
    np.testing.assert_array_equal(line_by_label(fig, "gradient dsin/dx").get_ydata(),
                                  tf.cos(tf.constant(np.linspace(0, 1, 5, dtype=np.float32))).numpy())
    assert all("plain" not in line.get_label() for ax in fig.axes for line in ax.get_lines())


def test_overlay_puts_everything_on_one_labelled_axes():
    fig = gp.forward_and_gradient(tf.tanh, clipped_tanh, overlay=True, title="tanh, clipped gradient")
    (ax,) = fig.axes
    labels = {line.get_label() for line in ax.get_lines()}
    assert {"forward tanh(x)", "gradient, modified", "gradient, plain"} <= labels
    assert fig.get_suptitle() == "tanh, clipped gradient"


def test_draws_into_given_axes_and_returns_their_figure():
    fig, axes = plt.subplots(1, 2)
    try:
        assert gp.forward_and_gradient(tf.tanh, clipped_tanh, axes=axes) is fig
        assert all(ax.get_legend() is not None for ax in axes)
        fig2, ax = plt.subplots()
        assert gp.forward_and_gradient(tf.tanh, axes=ax) is fig2
        assert len(fig2.axes) == 1
    finally:
        plt.close("all")


def test_lambda_names_fall_back_to_f():
    fig = gp.forward_and_gradient(lambda x: x * x)
    assert fig.axes[0].get_title() == "forward pass: y = f(x)"


@settings(max_examples=20, deadline=None)
# Factors far below 1 would make subnormal products, which TensorFlow's CPU kernels flush to zero
# and NumPy does not: the comparison would then test float arithmetic, not the explorer.
@given(factor=st.floats(-3.0, 3.0, allow_nan=False, width=32).filter(lambda f: f == 0 or abs(f) >= 1e-3))
def test_scaled_gradient_is_drawn_as_factor_times_plain(factor):
    fig = gp.forward_and_gradient(tf.tanh, lambda x: tf.tanh(gradlab.scale_gradient(x, factor)))
    plain = line_by_label(fig, "gradient, plain").get_ydata()
    np.testing.assert_array_equal(line_by_label(fig, "gradient, modified").get_ydata(),
                                  plain * np.float32(factor))


def test_infinite_values_are_drawn_as_gaps():
    fig = gp.forward_and_gradient(tf.math.reciprocal, x=np.linspace(-1, 1, 5, dtype=np.float32))
    forward = line_by_label(fig, "forward reciprocal(x)").get_ydata()
    assert np.isnan(forward[2]) and np.isfinite(np.delete(forward, 2)).all()


@pytest.mark.parametrize("kwargs, error, pattern", [
    ({"fn": 1}, TypeError, "fn must be callable"),
    ({"fn": tf.tanh, "modified": "x"}, TypeError, "modified must be callable"),
    ({"fn": tf.tanh, "axes": "ax"}, TypeError, "axes must be"),
    ({"fn": tf.tanh, "overlay": "yes"}, TypeError, "overlay"),
    ({"fn": tf.tanh, "figsize": (0, 3)}, ValueError, "figsize"),
    ({"fn": tf.tanh, "x": [[1.0]]}, ValueError, "x must be"),
])
def test_forward_and_gradient_rejects_bad_arguments(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        gp.forward_and_gradient(**kwargs)


def test_draw_forward_and_gradient_checks_shapes_and_axes():
    fig = Figure()
    with pytest.raises(ValueError, match="gradient must have x's shape"):
        gp.draw_forward_and_gradient(fig.subplots(1, 2), np.zeros(3), np.zeros(3), np.zeros(2))
    with pytest.raises(TypeError, match="axes must be one matplotlib Axes"):
        gp.draw_forward_and_gradient([1, 2], np.zeros(3), np.zeros(3), np.zeros(3))


# --- gradient norms ------------------------------------------------------------------------------------

def bar_heights(ax: Axes) -> list[float]:
    return [float(p.get_height()) for p in ax.patches]


def test_norm_bars_from_a_dict_show_each_layer_with_its_value():
    norms = {"dense": 0.5, "dense_1": tf.constant(2.0), "out": np.float32(1.25)}
    fig = gp.gradient_norm_bars(norms, title="after clipping")
    (ax,) = fig.axes
    assert bar_heights(ax) == [0.5, 2.0, 1.25]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["dense", "dense_1", "out"]
    assert [t.get_text() for t in ax.texts] == ["0.5", "2", "1.25"]
    assert ax.get_ylabel() == "gradient L2 norm" and ax.get_title() == "after clipping"


def test_norm_bars_beside_plain_norms():
    fig = gp.gradient_norm_bars([0.1, 0.2], plain=[1.0, 2.0], log=True)
    (ax,) = fig.axes
    assert bar_heights(ax) == [1.0, 2.0, pytest.approx(0.1), pytest.approx(0.2)]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["layer 0", "layer 1"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["plain", "modified"]
    assert ax.get_yscale() == "log"
    plain_bar, modified_bar = ax.patches[0], ax.patches[2]
    assert plain_bar.get_x() < modified_bar.get_x()  # plain on the left of each pair


def test_norm_bars_into_given_axes():
    fig, ax = plt.subplots()
    try:
        assert gp.gradient_norm_bars({"a": 1.0}, ax=ax) is fig
        assert bar_heights(ax) == [1.0]
    finally:
        plt.close(fig)


@pytest.mark.parametrize("norms, plain, error, pattern", [
    ({}, None, ValueError, "norms is empty"),
    ("1.0", None, TypeError, "norms must be a dict"),
    (3.0, None, TypeError, "norms must be a dict"),
    ({"a": -1.0}, None, ValueError, r"norms\['a'\] must be a finite norm >= 0"),
    ({"a": float("nan")}, None, ValueError, r"norms\['a'\]"),
    ({"a": "big"}, None, TypeError, r"norms\['a'\] must be a number"),
    ({"a": 1.0}, {"b": 1.0}, ValueError, "plain must give the same layers"),
    ([1.0, 2.0], [1.0], ValueError, "plain must give the same layers"),
])
def test_norm_bars_reject_bad_norms(norms, plain, error, pattern):
    with pytest.raises(error, match=pattern):
        gp.gradient_norm_bars(norms, plain=plain)


def test_layer_gradient_norms_of_a_keras_model():
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, name="hidden"),
                              keras.layers.Dense(1, name="out")])
    x = tf.random.normal((8, 3))
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(model(x) ** 2)
    gradients = tape.gradient(loss, model.trainable_variables)
    norms = gp.layer_gradient_norms(gradients, model.trainable_variables)
    assert list(norms) == [p.rsplit("/", 1)[0] for p in (v.path for v in model.trainable_variables)][::2]
    assert [name.rsplit("/", 1)[-1] for name in norms] == ["hidden", "out"]
    for name, (kernel, bias) in zip(norms, zip(gradients[::2], gradients[1::2])):
        expected = np.sqrt(np.sum(kernel.numpy() ** 2) + np.sum(bias.numpy() ** 2))
        assert norms[name] == pytest.approx(expected, rel=1e-6)


def test_layer_gradient_norms_counts_none_as_zero_and_checks_alignment():
    w = tf.Variable([1.0], name="layer/kernel")
    assert gp.layer_gradient_norms([None], [w]) == {"layer": 0.0}
    with pytest.raises(ValueError, match="aligned"):
        gp.layer_gradient_norms([None, None], [w])
    with pytest.raises(TypeError, match="variables must be"):
        gp.layer_gradient_norms([None], [object()])


def test_layer_gradient_norms_sums_the_repeated_rows_of_an_embedding_gradient():
    """A token read twice: the table's IndexedSlices holds two slices for one row, whose dense
    gradient is their sum; the norm is the dense gradient's (global_norm squared each slice)."""
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((4,), dtype="int32"),
                              keras.layers.Embedding(6, 3, name="embedding"),
                              keras.layers.Dense(1, name="out")])
    tokens = tf.constant([[1, 4, 1, 1], [2, 1, 5, 5]])
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(model(tokens) ** 2)
    gradients = tape.gradient(loss, model.trainable_variables)
    table_gradient = gradients[0]
    assert isinstance(table_gradient, tf.IndexedSlices) and table_gradient.indices.shape[0] == 8
    dense = [tf.convert_to_tensor(g).numpy().astype(np.float64) for g in gradients]
    norms = gp.layer_gradient_norms(gradients, model.trainable_variables)
    embedding, out = norms  # "sequential/embedding", "sequential/out"
    assert embedding.endswith("embedding") and out.endswith("out")
    assert norms[embedding] == pytest.approx(np.linalg.norm(dense[0]), rel=1e-6)
    assert norms[out] == pytest.approx(np.sqrt(np.sum(dense[1] ** 2) + np.sum(dense[2] ** 2)),
                                         rel=1e-6)
    slicewise = float(tf.linalg.global_norm([table_gradient]))  # the wrong reading, for contrast
    assert abs(slicewise - norms[embedding]) > 0.05 * norms[embedding]


@pytest.mark.parametrize("indices", [[0, 2, 0, 0], [2, 2, 2, 2], []], ids=["repeated", "one row", "empty"])
def test_layer_gradient_norms_of_indexed_slices_equals_the_dense_norm(indices):
    values = tf.constant(np.arange(1, 2 * len(indices) + 1, dtype=np.float32).reshape(-1, 2))
    slices = tf.IndexedSlices(values, tf.constant(indices, tf.int64), tf.constant([3, 2], tf.int64))
    table = tf.Variable(tf.zeros([3, 2]), name="embedding/embeddings")
    expected = np.linalg.norm(tf.convert_to_tensor(slices).numpy().astype(np.float64))
    assert gp.layer_gradient_norms([slices], [table]) == {"embedding": pytest.approx(expected, rel=1e-7)}


def test_layer_gradient_norms_neither_overflows_in_half_precision_nor_mixes_dtypes():
    kernel = tf.Variable(tf.zeros([2], tf.float16), name="layer/kernel")
    bias = tf.Variable(tf.zeros([1], tf.float64), name="layer/bias")
    gradients = [tf.constant([300.0, 400.0], tf.float16), tf.constant([1200.0], tf.float64)]
    # float16: 300**2 overflows (max 65504); float16 and float64 in one layer: one sum in float64
    assert gp.layer_gradient_norms(gradients, [kernel, bias]) == {"layer": 1300.0}


# --- computation_graph ------------------------------------------------------------------------------

CHAIN = dict(
    nodes=["x", "u", "y", "L"], ops=["×3", "square", "loss"],
    forward=["x = 1", "u = 3", "y = 9", "L = 9"],
    backward=["dL/dx = 9", "dL/du = 3", "dL/dy = 1", "dL/dL = 1"],
)


def texts(fig: Figure, gid: str) -> list:
    return [t for t in fig.axes[0].texts if t.get_gid() == gid]


def patch(fig: Figure, gid: str):
    found = [p for p in fig.axes[0].patches if p.get_gid() == gid]
    assert len(found) == 1, f"expected one patch {gid!r}, found {len(found)}"
    return found[0]


def test_computation_graph_draws_every_label_in_its_row():
    fig = gp.computation_graph(**CHAIN, modified=1, rule="dy → 0.5·dy", title="y = (3x)²")
    assert isinstance(fig, Figure) and len(fig.axes) == 1
    assert [t.get_text() for t in texts(fig, "node")] == CHAIN["nodes"]
    assert [t.get_text() for t in texts(fig, "op")] == CHAIN["ops"]
    assert [t.get_text() for t in texts(fig, "forward")] == CHAIN["forward"]
    assert [t.get_text() for t in texts(fig, "backward")] == CHAIN["backward"]
    assert [t.get_text() for t in texts(fig, "rule")] == ["dy → 0.5·dy"]
    assert fig.axes[0].get_title() == "y = (3x)²"
    # Nodes left to right; forward values above the chain, gradients below it.
    xs = [t.get_position()[0] for t in texts(fig, "node")]
    assert xs == sorted(xs) and len(set(xs)) == 4
    assert all(t.get_position()[1] > 0 for t in texts(fig, "forward"))
    assert all(t.get_position()[1] < 0 for t in texts(fig, "backward"))
    # Ops sit between the nodes they join.
    for i, op in enumerate(texts(fig, "op")):
        assert xs[i] < op.get_position()[0] < xs[i + 1]


def test_computation_graph_arrows_point_right_forward_and_left_backward():
    fig = gp.computation_graph(**CHAIN)
    for i in range(3):
        (fx0, _), (fx1, _) = patch(fig, f"forward arrow {i}")._posA_posB
        (bx0, by), (bx1, _) = patch(fig, f"backward arrow {i}")._posA_posB
        assert fx0 < fx1, "forward arrows point right"
        assert bx0 > bx1 and by < 0, "backward arrows point left, below the chain"
        assert i < fx0 < fx1 < i + 1 and i < bx1 < bx0 < i + 1


def test_computation_graph_highlights_only_the_modified_edge():
    fig = gp.computation_graph(**CHAIN, modified=1, rule="dy → clip(dy, -0.1, 0.1)")
    red = to_rgba(gp.GRAPH_COLORS["modified"])
    edges = {line.get_gid(): line for line in fig.axes[0].get_lines()}
    assert to_rgba(edges["edge 1"].get_color()) == red
    assert edges["edge 1"].get_linewidth() > edges["edge 0"].get_linewidth()
    assert all(to_rgba(edges[f"edge {i}"].get_color()) != red for i in (0, 2))
    assert [to_rgba(t.get_color()) == red for t in texts(fig, "op")] == [False, True, False]
    assert to_rgba(texts(fig, "rule")[0].get_color()) == red
    assert texts(fig, "rule")[0].get_position()[0] == pytest.approx(1.5)  # under edge 1
    # The backward arrow of the modified op is red; its forward arrow is not (forward unchanged).
    assert patch(fig, "backward arrow 1").get_edgecolor() == red
    assert patch(fig, "backward arrow 0").get_edgecolor() == to_rgba(gp.GRAPH_COLORS["backward"])
    assert patch(fig, "forward arrow 1").get_edgecolor() == to_rgba(gp.GRAPH_COLORS["forward"])


def test_computation_graph_without_optional_parts_draws_nodes_and_edges_only():
    fig = gp.computation_graph(("a", "b"))
    ax = fig.axes[0]
    assert [t.get_text() for t in texts(fig, "node")] == ["a", "b"]
    assert [line.get_gid() for line in ax.get_lines()] == ["edge 0"]
    assert not ax.patches and not texts(fig, "op") and not texts(fig, "rule")
    assert to_rgba(ax.get_lines()[0].get_color()) != to_rgba(gp.GRAPH_COLORS["modified"])


def test_computation_graph_draws_into_given_axes():
    fig, ax = plt.subplots()
    try:
        assert gp.computation_graph(["x", "y"], ops=["f"], ax=ax) is fig
        assert [t.get_text() for t in texts(fig, "op")] == ["f"]
    finally:
        plt.close(fig)


@pytest.mark.parametrize("kwargs, error, pattern", [
    ({"nodes": "xy"}, TypeError, "nodes must be a list of strings"),
    ({"nodes": ["x"]}, ValueError, "nodes must name at least 2 values"),
    ({"nodes": []}, ValueError, "nodes must name at least 2"),
    ({"nodes": ["x", 1]}, TypeError, r"nodes\[1\] must be a string; got int 1"),
    ({"nodes": ["x", "y"], "ops": ["f", "g"]}, ValueError, r"ops must have 1 entries.*\['f', 'g'\]"),
    ({"nodes": ["x", "y"], "ops": "f"}, TypeError, "ops must be a list of strings"),
    ({"nodes": ["x", "y"], "forward": ["1"]}, ValueError, "forward must have 2 entries"),
    ({"nodes": ["x", "y"], "backward": [1.0, 2.0]}, TypeError, r"backward\[0\] must be a string"),
    ({"nodes": ["x", "y"], "modified": 1}, ValueError, "modified must be an edge index from 0 to 0.*got 1"),
    ({"nodes": ["x", "y"], "modified": -1}, ValueError, "modified must be an edge index.*got -1"),
    ({"nodes": ["x", "y"], "modified": 0.0}, TypeError, "modified must be an edge index .*float 0.0"),
    ({"nodes": ["x", "y"], "modified": True}, TypeError, "modified must be an edge index"),
    ({"nodes": ["x", "y"], "rule": "dy → 2·dy"}, ValueError, "rule 'dy → 2·dy' needs modified"),
    ({"nodes": ["x", "y"], "modified": 0, "rule": 2}, TypeError, "rule must be a string"),
    ({"nodes": ["x", "y"], "title": ["t"]}, TypeError, "title must be a string"),
    ({"nodes": ["x", "y"], "ax": "ax"}, TypeError, "ax must be a matplotlib Axes"),
])
def test_computation_graph_rejects_bad_arguments(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        gp.computation_graph(**kwargs)


def test_docstring_examples_run():
    result = doctest.testmod(gp, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 10 and result.failed == 0
