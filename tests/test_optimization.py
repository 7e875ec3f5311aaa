"""BERT's optimizer: schedule values, which variables decay, clipping, LAMB."""

import collections
import contextlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from bert_tf import distribute, heads
from bert_tf.config import BertConfig
from bert_tf.encoder import BertEncoder
from bert_tf.optimization import AdamW, WarmupLinearDecay, create_optimizer

TINY = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                  intermediate_size=16, max_position_embeddings=16)


def test_schedule_values_at_given_steps():
    schedule = WarmupLinearDecay(1e-4, num_train_steps=100, num_warmup_steps=10)
    expected = {0: 0.0, 5: 5e-5, 9: 9e-5,
                # After warmup the original's decay line, which started at step 0:
                10: 1e-4 * 0.9, 55: 1e-4 * 0.45, 99: 1e-6, 100: 0.0, 150: 0.0}
    for step, value in expected.items():
        assert float(schedule(step)) == pytest.approx(value, rel=1e-5, abs=1e-12), step
    no_warmup = WarmupLinearDecay(2e-5, num_train_steps=10, num_warmup_steps=0)
    assert [float(no_warmup(s)) for s in (0, 5, 10)] == pytest.approx([2e-5, 1e-5, 0.0])


def test_schedule_matches_tf_models_official():
    """The reference: tf-models-official's WarmUp over PolynomialDecay (its BERT code)."""
    import tf_keras
    from official.nlp.optimization import WarmUp
    total, warmup, peak = 234, 23, 2e-5
    reference = WarmUp(peak, tf_keras.optimizers.schedules.PolynomialDecay(peak, total, 0.0),
                       warmup)
    ours = WarmupLinearDecay(peak, total, warmup)
    steps = np.arange(0, total + 20)
    np.testing.assert_allclose([float(ours(s)) for s in steps],
                               [float(reference(s)) for s in steps], rtol=1e-5, atol=1e-12)


def test_schedule_serializes_and_rejects_bad_steps():
    schedule = WarmupLinearDecay(3e-5, 50, 5)
    again = keras.optimizers.schedules.deserialize(keras.optimizers.schedules.serialize(schedule))
    assert [float(again(s)) for s in (0, 3, 20)] == [float(schedule(s)) for s in (0, 3, 20)]
    with pytest.raises(ValueError, match="num_warmup_steps"):
        WarmupLinearDecay(1e-4, 10, 11)
    with pytest.raises(ValueError, match="num_train_steps"):
        WarmupLinearDecay(1e-4, 0, 0)


def _tiny_model(num_layers: int = 1):
    encoder = BertEncoder(TINY.replace(num_hidden_layers=num_layers))
    encoder.build()
    head = heads.ClassificationHead(3, name="head")
    head.build((None, TINY.hidden_size))
    return encoder.trainable_variables + head.trainable_variables


@pytest.mark.parametrize("name", ["adamw", "lamb"])
def test_weight_decay_skips_layer_norm_and_biases(name):
    """With zero gradients Adam's step is 0, so a variable moves only by weight decay:
    var -= lr * weight_decay * var. Only kernels and embedding tables may move."""
    variables = _tiny_model()
    before = [v.numpy().copy() for v in variables]
    lr, decay = 0.1, 0.01
    optimizer = create_optimizer(lr, num_train_steps=10, num_warmup_steps=0,
                                 weight_decay=decay, optimizer=name)
    optimizer.apply_gradients([(np.zeros(v.shape, "float32"), v) for v in variables])
    decayed, kept = set(), set()
    for v, old in zip(variables, before):
        if np.allclose(v.numpy(), old, rtol=0, atol=0):
            kept.add(v.path)
        else:
            np.testing.assert_allclose(v.numpy(), old * (1 - lr * decay), rtol=1e-6)
            decayed.add(v.path)
    assert all(p.rsplit("/", 1)[1] in ("kernel", "embeddings", "position_embedding")
               for p in decayed)
    assert all(p.rsplit("/", 1)[1] in ("gamma", "beta", "bias") for p in kept)
    # Every kind of variable of the model is on its side: LayerNorm of embeddings and
    # blocks, every dense bias (attention, FFN, pooler, head) kept; all kernels decayed.
    assert {p for p in kept if "layer_norm" in p} == {
        v.path for v in variables if v.path.endswith(("gamma", "beta"))}
    assert len(decayed) + len(kept) == len(variables) and len(decayed) == 11


def test_optimizer_settings():
    optimizer = create_optimizer(5e-5, 1000, 100, clipnorm=1.0)
    assert isinstance(optimizer, keras.optimizers.AdamW)
    assert optimizer.global_clipnorm == 1.0 and optimizer.clipnorm is None
    assert optimizer.weight_decay == 0.01 and optimizer.epsilon == 1e-6
    assert (optimizer.beta_1, optimizer.beta_2) == (0.9, 0.999)
    assert float(optimizer.learning_rate) == 0.0  # step 0 of the warmup
    lamb = create_optimizer(1e-3, 100, 10, optimizer="lamb")
    assert isinstance(lamb, keras.optimizers.Lamb) and lamb.global_clipnorm is None
    with pytest.raises(ValueError, match="optimizer"):
        create_optimizer(1e-3, 10, 1, optimizer="sgd")



def _trajectory(optimizer_cls, graph: bool, sparse: bool = True) -> tuple:
    """Five steps of `optimizer_cls` (BERT's settings: warmup schedule, clipping, weight
    decay off LayerNorm and biases) on a tiny model, a dense gradient for the kernels
    and an IndexedSlices one (an embedding lookup's) for the table; sparse=False: the
    table's as the dense tensor it sums to."""
    keras.utils.set_random_seed(0)
    variables = _tiny_model()
    optimizer = optimizer_cls(learning_rate=WarmupLinearDecay(0.05, 10, 2), weight_decay=0.01,
                              epsilon=1e-6, global_clipnorm=1.0)
    optimizer.exclude_from_weight_decay(var_names=["gamma", "beta", "bias"])
    rng = np.random.default_rng(1)

    def gradient(v):
        if v.path.endswith("token_embedding/embeddings"):
            rows = tf.constant([3, 7, 3], tf.int64)  # a repeated row is summed
            slices = tf.IndexedSlices(tf.constant(rng.normal(size=(3, v.shape[1])),
                                                  tf.float32), rows, tf.constant(v.shape, tf.int64))
            return slices if sparse else tf.convert_to_tensor(slices)
        return tf.constant(rng.normal(size=v.shape), tf.float32)

    optimizer.build(variables)
    step = lambda grads: optimizer.apply(grads, variables)  # noqa: E731
    step = tf.function(step) if graph else step
    for _ in range(5):
        step([gradient(v) for v in variables])
    return [v.numpy() for v in variables], optimizer


@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_fused_adamw_follows_keras_adamw(graph):
    """The fused update computes Keras's AdamW, up to float32 reassociation, on the
    gradient as the dense tensor it sums to: Keras's global-norm clipping squares an
    IndexedSlices gradient's slices before adding a repeated row's (tf.linalg.global_norm
    does the same), a norm that is not the gradient's; ours sums them first (test below)."""
    ours, optimizer = _trajectory(AdamW, graph)
    keras_values, _ = _trajectory(keras.optimizers.AdamW, graph, sparse=False)
    initial, _ = _trajectory(lambda **kw: keras.optimizers.SGD(0.0), graph)
    for got, want, start in zip(ours, keras_values, initial):
        assert not np.array_equal(got, start) or np.array_equal(want, start)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    assert int(optimizer.iterations) == 5


def test_an_embedding_gradient_updates_as_the_dense_gradient_it_sums_to():
    sparse, _ = _trajectory(AdamW, graph=True)
    dense, _ = _trajectory(AdamW, graph=True, sparse=False)
    for got, want in zip(sparse, dense):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def _apply_graph_op_types(strategy_name: str, num_layers: int = 1
                          ) -> tuple[list, collections.Counter]:
    """(the variables, op types of one traced `apply`) of BERT's AdamW for a model of
    `num_layers`, built under `strategy_name`'s scope (None: the default strategy)."""
    scope = (distribute.create_strategy(strategy_name).scope() if strategy_name
             else contextlib.nullcontext())
    with scope:
        variables = _tiny_model(num_layers)
        optimizer = create_optimizer(1e-3, 10, 1, clipnorm=1.0)
        optimizer.build(variables)
    apply = tf.function(lambda grads: optimizer.apply(grads, variables))
    graph = apply.get_concrete_function([tf.TensorSpec(v.shape, v.dtype)
                                         for v in variables]).graph
    return variables, collections.Counter(op.type for op in graph.get_operations())


def test_fused_kernel_runs_once_per_variable_on_one_device():
    """`--strategy cpu` (one device) holds plain variables: one fused kernel each."""
    variables, op_types = _apply_graph_op_types("cpu")
    assert op_types["ResourceApplyAdam"] == len(variables)


@pytest.mark.parametrize("strategy_name", [None, "cpu"])
def test_one_replica_computes_the_step_scalars_once(strategy_name):
    """On one replica the learning-rate schedule (its `minimum`) and Adam's bias
    corrections (`pow`) are computed per step, not per variable as Keras's AdamW does:
    a model with twice the layers has as many of them in its update."""
    one_layer, ops_one = _apply_graph_op_types(strategy_name, num_layers=1)
    two_layers, ops_two = _apply_graph_op_types(strategy_name, num_layers=2)
    assert len(two_layers) > len(one_layer) + 10
    assert ops_two["ResourceApplyAdam"] == len(two_layers)
    assert ops_two["Pow"] == ops_one["Pow"] == 2  # beta_1 ** t, beta_2 ** t
    assert ops_two["Minimum"] == ops_one["Minimum"]


def test_one_replica_keeps_an_embedding_gradient_sparse_until_the_update():
    """A repeated row's slices are summed (one segment sum on the slices) and the
    fused update makes them dense once (the other): clipping neither squares nor
    scales a dense [V, H] table. The weight decay multiplies each decayed variable once."""
    keras.utils.set_random_seed(0)
    variables = _tiny_model()
    optimizer = create_optimizer(1e-3, 10, 1, clipnorm=1.0)
    optimizer.build(variables)
    table = next(i for i, v in enumerate(variables)
                 if v.path.endswith("token_embedding/embeddings"))
    specs = [tf.TensorSpec(v.shape, v.dtype) for v in variables]
    specs[table] = tf.IndexedSlicesSpec(variables[table].shape, tf.float32, tf.int64, tf.int64)
    apply = tf.function(lambda grads: optimizer.apply(grads, variables))
    operations = apply.get_concrete_function(specs).graph.get_operations()
    assert sum(op.type == "UnsortedSegmentSum" for op in operations) == 2
    decayed = [v for v in variables if optimizer._use_weight_decay(v)]
    assert 0 < len(decayed) < len(variables)
    # Multiplies of a whole tensor: clipping scales every gradient (the table's slices),
    # decay each decayed variable (the step's scalars are rank 0).
    tensor_muls = [op for op in operations
                   if op.type == "Mul" and op.outputs[0].shape.rank != 0]
    assert len(tensor_muls) == len(variables) + len(decayed)


def test_mirrored_variables_take_keras_update():
    """Mirrored variables are not fused; the update is still Keras's AdamW's."""
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
    results = []
    for cls in (AdamW, keras.optimizers.AdamW):
        keras.utils.set_random_seed(0)
        with strategy.scope():
            variables = _tiny_model()
            optimizer = cls(learning_rate=0.01, weight_decay=0.01, epsilon=1e-6)
            optimizer.build(variables)
        grads = [tf.ones(v.shape) * 0.1 for v in variables]
        step = tf.function(lambda: strategy.run(lambda: optimizer.apply(grads, variables)))
        for _ in range(2):
            step()
        results.append([v.numpy() for v in variables])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
