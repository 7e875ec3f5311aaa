r"""BERT's optimizer: AdamW (or LAMB) with linear warmup, then linear decay to zero.

Shared by pretraining and fine-tuning. As in google-research/bert `optimization.py`:

  - the learning rate decays linearly from its peak at step 0 to 0 at `num_train_steps`
    (`polynomial_decay`, power 1), and for the first `num_warmup_steps` it is replaced by
    `peak * step / num_warmup_steps`. So at the end of warmup it is
    `peak * (1 - num_warmup_steps / num_train_steps)`, not the peak itself:

        lr
        |      /\
        |     /   `\.
        |    /       `\.
        |   /           `\.
        |  /               `\.
        | /                   `\.
        +--------------------------- step
        0  warmup              num_train_steps

  - weight decay 0.01 is decoupled from the gradient (added to the Adam update, times the
    learning rate) and not applied to LayerNorm parameters or biases.
  - epsilon 1e-6, beta_2 0.999; gradients clipped to global norm 1.0 in the original.

Differences from the original, both Keras's: Adam's moments are bias-corrected (the
original's AdamWeightDecayOptimizer skips it; with warmup the effect is small), and
LAMB's weight decay is applied outside the trust ratio.
"""

from typing import Optional

import keras
import tensorflow as tf
from keras import ops

# Variables whose name (the last path component) contains one of these get no weight
# decay: Keras names LayerNormalization's parameters gamma/beta (bert_tf.layer_norm keeps
# them; the original matched "LayerNorm"), and every bias ("bias", "output_bias"), as in
# the original.
NO_DECAY_NAMES = ("gamma", "beta", "bias")

OPTIMIZERS = ("adamw", "lamb")


@keras.saving.register_keras_serializable(package="bert_tf")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """Linear warmup from 0, then linear decay to `end_learning_rate` (the original's
    schedule; see the module docstring for the shape).

    Args:
        learning_rate: peak learning rate.
        num_train_steps: step at which the decay reaches `end_learning_rate`.
        num_warmup_steps: steps of linear warmup (0: none).
        end_learning_rate: value at and after `num_train_steps`.
    """

    def __init__(self, learning_rate, num_train_steps, num_warmup_steps,
                 end_learning_rate=0.0):
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
        if not 0 <= num_warmup_steps <= num_train_steps:
            raise ValueError(f"num_warmup_steps must lie in [0, num_train_steps="
                             f"{num_train_steps}], got {num_warmup_steps}")
        self.learning_rate = learning_rate
        self.num_train_steps = num_train_steps
        self.num_warmup_steps = num_warmup_steps
        self.end_learning_rate = end_learning_rate

    def __call__(self, step):
        step = ops.cast(step, "float32")
        done = ops.minimum(step, self.num_train_steps) / self.num_train_steps
        decayed = (self.learning_rate - self.end_learning_rate) * (1.0 - done) + \
            self.end_learning_rate
        if not self.num_warmup_steps:
            return decayed
        warmup = self.learning_rate * step / self.num_warmup_steps
        return ops.where(step < self.num_warmup_steps, warmup, decayed)

    def get_config(self):
        return {"learning_rate": self.learning_rate, "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps,
                "end_learning_rate": self.end_learning_rate}


@keras.saving.register_keras_serializable(package="bert_tf")
class AdamW(keras.optimizers.AdamW):
    """Keras's AdamW whose Adam update of a float32 variable is TensorFlow's fused
    kernel (`ResourceApplyAdam`, the one tf.keras's Adam used): one pass over the
    variable, its moments and its gradient instead of Keras's ~10 elementwise ops, each
    a pass of its own. A small model's optimizer time is mostly its 30,522-row embedding
    table's update: on this CPU the whole step ran 1.10x faster for a MiniLM-size
    fine-tuning and 1.08x for Tiny's pretraining (results/benchmark/fused_adam_ab.py,
    8 rounds; the intervals' lower bounds 1.03). The arithmetic is
    Keras's (bias-corrected step size, epsilon added to sqrt(v)); weight decay and
    clipping stay Keras's, applied before the update as there, except that an embedding
    gradient's norm is its own (`_backend_apply_gradients`). Distributed variables
    (Mirrored, TPU), other dtypes, amsgrad and other backends take Keras's own update.

    On one replica (the default strategy, OneDeviceStrategy) the step's scalars (the
    learning rate, Adam's bias corrections, the decay rate) are computed once per step,
    not once per variable as Keras does (it even evaluates the learning-rate schedule
    again for each decayed variable), and no variable goes through the strategy's
    `merge_call` / `update`: a quarter of the ops of a fine-tuning train step were these
    (1,946 of 7,661), and tracing pays for every op (its trace 1.45x shorter without them:
    results/benchmark/trace_ab.py).
    """

    # Whether the step's embedding slices are one per row (`_backend_apply_gradients`),
    # so that `_clip_gradients` may measure them as they are.
    _slices_summed = False

    def update_step(self, gradient, variable, learning_rate):
        self._update(gradient, variable, learning_rate, scalars={})

    def _update(self, gradient, variable, learning_rate, scalars: dict) -> None:
        """One variable's update; `scalars` caches `_adam_scalars` by dtype for the step."""
        index = self._get_variable_index(variable)
        m, v = self._momentums[index].value, self._velocities[index].value
        if self.amsgrad or not _fusable(variable, m, v):
            return super().update_step(gradient, variable, learning_rate)
        if variable.dtype not in scalars:
            scalars[variable.dtype] = self._adam_scalars(variable.dtype, learning_rate)
        tf.raw_ops.ResourceApplyAdam(var=variable.handle, m=m.handle, v=v.handle,
                                     grad=tf.convert_to_tensor(gradient), use_locking=False,
                                     **scalars[variable.dtype])

    def _adam_scalars(self, dtype, learning_rate) -> dict:
        """ResourceApplyAdam's scalar arguments at this step."""
        step = tf.cast(self.iterations + 1, dtype)
        beta_1, beta_2 = tf.cast(self.beta_1, dtype), tf.cast(self.beta_2, dtype)
        return dict(beta1_power=tf.pow(beta_1, step), beta2_power=tf.pow(beta_2, step),
                    lr=tf.cast(learning_rate, dtype), beta1=beta_1, beta2=beta_2,
                    epsilon=tf.cast(self.epsilon, dtype))

    def _backend_update_step(self, grads, trainable_variables, learning_rate):
        variables = _tf_variables(trainable_variables)
        if not _one_replica(variables):
            return super()._backend_update_step(grads, trainable_variables, learning_rate)
        scalars = {}  # shared by every variable of the step
        for gradient, variable in zip(grads, variables):
            self._update(gradient, variable, learning_rate, scalars)

    def _backend_apply_gradients(self, grads, trainable_variables):
        # An embedding lookup's gradient is IndexedSlices, one slice per token, and
        # Keras's global-norm clipping squares the slices before a repeated token's are
        # added up: the norm it clips by is not the gradient's (tf.linalg.global_norm, the
        # original's, does the same; its TPU lookups were one-hot matmuls with dense
        # gradients, as PyTorch's are). On one replica a repeated row's slices are summed
        # first, so the norm is the gradient's; the slices stay slices (clipping scales
        # them, the fused update makes them dense once). Replicas keep Keras's clipping.
        self._slices_summed = _one_replica(_tf_variables(trainable_variables))
        if self._slices_summed:
            grads = [_summed_slices(g) if isinstance(g, tf.IndexedSlices) else g
                     for g in grads]
        return super()._backend_apply_gradients(grads, trainable_variables)

    def _clip_gradients(self, grads):
        # Keras's clipping would make the slices dense to square them.
        if (self.global_clipnorm and self._slices_summed
                and any(isinstance(g, tf.IndexedSlices) for g in grads)):
            return _clip_by_global_norm(grads, self.global_clipnorm)
        return super()._clip_gradients(grads)

    def _apply_weight_decay(self, variables):
        tf_variables = _tf_variables(variables)
        if self.weight_decay is None or not _one_replica(tf_variables):
            return super()._apply_weight_decay(variables)
        learning_rate, rates = self.learning_rate, {}  # weight decay x lr, by dtype
        for variable in tf_variables:
            if not self._use_weight_decay(variable):
                continue
            if variable.dtype not in rates:
                rates[variable.dtype] = (tf.cast(self.weight_decay, variable.dtype)
                                         * tf.cast(learning_rate, variable.dtype))
            # Keras's variable * wd * lr up to reassociation, one pass over the variable.
            variable.assign_sub(variable * rates[variable.dtype])


def _summed_slices(gradient: tf.IndexedSlices) -> tf.IndexedSlices:
    """The same gradient with one slice per row: a repeated row's slices summed."""
    rows, slot = tf.unique(gradient.indices)
    values = tf.math.unsorted_segment_sum(gradient.values, slot, tf.shape(rows)[0])
    return tf.IndexedSlices(values, rows, gradient.dense_shape)


def _clip_by_global_norm(grads: list, clip_norm: float) -> list:
    """Keras's clip_by_global_norm (a NaN scale when the norm is not finite), with
    IndexedSlices measured and scaled on their slices: one per row (`_summed_slices`)."""
    parts = [g.values if isinstance(g, tf.IndexedSlices) else g for g in grads if g is not None]
    norm = tf.sqrt(tf.add_n([tf.reduce_sum(tf.square(p)) for p in parts]))
    scale = clip_norm * tf.minimum(1.0 / norm, 1.0 / clip_norm) + (norm - norm)

    def scaled(g):
        if isinstance(g, tf.IndexedSlices):
            return tf.IndexedSlices(g.values * tf.cast(scale, g.dtype), g.indices, g.dense_shape)
        return g * tf.cast(scale, g.dtype)
    return [None if g is None else scaled(g) for g in grads]


def _tf_variables(variables) -> list:
    """Keras variables as the tf.Variables they hold (what Keras's TF optimizer updates)."""
    return [v.value if isinstance(v, keras.Variable) else v for v in variables]


def _one_replica(variables) -> bool:
    """One replica holding plain variables: nothing to merge or mirror."""
    return (keras.backend.backend() == "tensorflow"
            and tf.distribute.get_strategy().num_replicas_in_sync == 1
            and not any(isinstance(v, tf.distribute.DistributedValues) for v in variables))


def _fusable(*variables) -> bool:
    return (keras.backend.backend() == "tensorflow"
            and all(isinstance(x, tf.Variable) and x.dtype == tf.float32
                    and not isinstance(x, tf.distribute.DistributedValues)
                    for x in variables))


def create_optimizer(learning_rate: float, num_train_steps: int, num_warmup_steps: int,
                     weight_decay: float = 0.01, beta_1: float = 0.9, beta_2: float = 0.999,
                     epsilon: float = 1e-6, clipnorm: Optional[float] = None,
                     optimizer: str = "adamw") -> keras.optimizers.Optimizer:
    """BERT's optimizer with its warmup / linear-decay schedule.

    Args:
        learning_rate: peak learning rate.
        num_train_steps: total optimizer steps (the schedule reaches 0 there).
        num_warmup_steps: linear warmup steps (BERT: 10% of `num_train_steps` when
            fine-tuning, 10,000 when pretraining).
        weight_decay: decoupled weight decay rate, not applied to LayerNorm parameters
            or biases (`NO_DECAY_NAMES`).
        beta_1, beta_2, epsilon: Adam's constants (BERT's values are the defaults).
        clipnorm: clip the gradients to this *global* norm (all variables together, the
            original's `clip_by_global_norm(grads, 1.0)`); None: no clipping.
        optimizer: "adamw" (the paper) or "lamb" (You et al. 2019, large batches).

    Returns:
        A Keras 3 optimizer; build it on the model's variables as usual.
    """
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer {optimizer!r} not in {OPTIMIZERS}")
    schedule = WarmupLinearDecay(learning_rate, num_train_steps, num_warmup_steps)
    cls = AdamW if optimizer == "adamw" else keras.optimizers.Lamb
    result = cls(learning_rate=schedule, weight_decay=weight_decay, beta_1=beta_1,
                 beta_2=beta_2, epsilon=epsilon, global_clipnorm=clipnorm)
    result.exclude_from_weight_decay(var_names=list(NO_DECAY_NAMES))
    return result

