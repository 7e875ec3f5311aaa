import sys, time, statistics
import tensorflow as tf, keras
from keras import ops
from bert_tf import attention
from bert_tf.config import config_for_size
from bert_tf.encoder import BertEncoder
from bert_tf.heads import ClassificationHead
from bert_tf.benchmark import random_batch

precision = sys.argv[1]
orig_call = attention.SelfAttention.call

def fused_call(self, x, mask, training=None):
    batch, seq_length = ops.shape(x)[0], ops.shape(x)[1]
    kernel = ops.concatenate([self.query.kernel, self.key.kernel, self.value.kernel], axis=-1)
    bias = ops.concatenate([self.query.bias, self.key.bias, self.value.bias], axis=-1)
    qkv = ops.matmul(x, ops.cast(kernel, x.dtype)) + ops.cast(bias, x.dtype)
    qkv = ops.reshape(qkv, (batch, seq_length, 3, self.num_heads, self.head_size))
    qkv = ops.transpose(qkv, (2, 0, 3, 1, 4))  # [3, B, A, T, D]
    q, k, v = qkv[0], qkv[1], qkv[2]
    scores = ops.matmul(q, ops.transpose(k, (0, 1, 3, 2)))
    scores = ops.cast(scores, "float32") / (self.head_size ** 0.5)
    scores = ops.where(mask[:, None], scores, -1e9)
    probs = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)
    probs = self.dropout_layer(probs, training=training)
    context = ops.matmul(probs, v)
    context = ops.reshape(ops.transpose(context, (0, 2, 1, 3)), (batch, seq_length, self.num_heads * self.head_size))
    return self.output_dense(context)

def einsum_call(self, x, mask, training=None, fused=False):
    batch, seq_length = ops.shape(x)[0], ops.shape(x)[1]
    split = lambda t: ops.reshape(t, (batch, seq_length, self.num_heads, self.head_size))
    if fused:
        kernel = ops.concatenate([self.query.kernel, self.key.kernel, self.value.kernel], axis=-1)
        bias = ops.concatenate([self.query.bias, self.key.bias, self.value.bias], axis=-1)
        qkv = ops.matmul(x, ops.cast(kernel, x.dtype)) + ops.cast(bias, x.dtype)
        q, k, v = (split(t) for t in ops.split(qkv, 3, axis=-1))
    else:
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
    q = q / ops.cast(self.head_size ** 0.5, q.dtype)
    scores = ops.einsum("btad,bsad->bats", q, k)
    scores = ops.cast(scores, "float32")
    scores = ops.where(mask[:, None], scores, -1e9)
    probs = ops.cast(ops.softmax(scores, axis=-1), self.compute_dtype)
    probs = self.dropout_layer(probs, training=training)
    context = ops.einsum("bats,bsad->btad", probs, v)
    return self.output_dense(ops.reshape(context, (batch, seq_length, self.num_heads * self.head_size)))

config = config_for_size(sys.argv[2] if len(sys.argv) > 2 else "base")
ids, mask, seg, labels = (tf.constant(x) for x in random_batch(config, 32, 128))
inputs = {"input_ids": ids, "input_mask": mask, "segment_ids": seg}
steps = {}
VARIANTS = (("separate", orig_call), ("fused", fused_call), ("einsum", einsum_call),
            ("einsum_fused", lambda self, x, mask, training=None: einsum_call(self, x, mask, training, fused=True)))
for name, call in VARIANTS:
    attention.SelfAttention.call = call
    enc = BertEncoder(config, dtype=precision); head = ClassificationHead(2, dtype=precision)
    enc.build(); head.build((None, config.hidden_size))
    vs = enc.trainable_variables + head.trainable_variables
    opt = keras.optimizers.AdamW(1e-5); opt.build(vs)
    def make(enc, head, vs, opt):
        @tf.function(jit_compile=True)
        def step():
            with tf.GradientTape() as tape:
                logits = head(enc(inputs, training=True)["pooled_output"], training=True)
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
            opt.apply_gradients(zip(tape.gradient(loss, vs), vs)); return loss
        return step
    step = make(enc, head, vs, opt)
    step().numpy()
    steps[name] = step
times = {n: [] for n in steps}
for r in range(4):
    for n, s in steps.items():
        t = time.perf_counter(); s().numpy(); times[n].append(time.perf_counter() - t)
    print(r, {n: round(v[-1], 2) for n, v in times.items()}, flush=True)
print(precision, {n: round(statistics.median(v), 2) for n, v in times.items()})
