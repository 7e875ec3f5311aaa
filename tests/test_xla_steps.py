"""Accelerator readiness where a CPU can check it: every training and evaluation step the
paper plan uses compiles with XLA (`jit_compile=True`) at static shapes and runs. XLA on
CPU rejects the dynamic shapes a TPU would reject (tiny configs; seconds each).

Pretraining: bert_tf.trainer's steps for NSP and LTR, phase 1 and phase 2 shapes, with
steps_per_execution > 1 (as the paper plan sets for TPUs). Fine-tuning: glue_suite's
model of each task kind (sequence classification, regression, multiple choice, span,
token tagging, the BiLSTM head, the feature-based BiLSTM), one train step and one
prediction step each, padded to max_seq_length as on a TPU.
"""

import keras
import numpy as np
import pytest

from glue_suite import task_models, tasks
from glue_suite.tasks import TASKS
from tests.test_finetune import (T, checkpoint, deep_checkpoint,  # noqa: F401 (fixtures)
                                 random_inputs)
from tests.test_pretrain import P2, T2, data, make_config, run  # noqa: F401  (fixture)

# XLA compiles for 20-60 s a test on 2 cores: minutes in all.
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("objective", ["nsp", "ltr"])
def test_pretraining_steps_compile_in_both_phases(data, tmp_path, objective):
    config = make_config(data, tmp_path, objective=objective, jit_compile=True,
                         num_train_steps=4, num_warmup_steps=1, steps_per_execution=2,
                         phase2_train_files=f"{data}/phase2.tfrecord", phase2_seq_length=T2,
                         phase2_max_predictions_per_seq=P2, phase2_fraction=0.5,
                         eval_files=f"{data}/eval.tfrecord", eval_steps=1, eval_every=2,
                         save_checkpoints_steps=4)
    losses, _, trainer = run(config)
    assert trainer.phase == 2 and int(trainer.step.numpy()) == 4
    assert np.all(np.isfinite(losses))
    assert trainer._gradients._jit_compile  # the forward and backward pass under XLA
    # Static shapes: the TPU's requirement (drop_remainder, fixed lengths).
    assert trainer.iterators[0].element_spec["input_ids"].shape == (16, T2)


def _labels(task, batch):
    kind = TASKS[task].kind
    rng = np.random.default_rng(0)
    if kind == tasks.SPAN:
        return {"start_logits": rng.integers(0, T, batch), "end_logits": rng.integers(0, T, batch)}
    if kind == tasks.REGRESSION:
        return rng.random(batch).astype("float32") * 5
    if kind == tasks.TOKEN:
        return rng.integers(0, len(TASKS[task].labels), (batch, T))
    return rng.integers(0, len(TASKS[task].labels), batch)


@pytest.mark.parametrize("task,variant", [
    ("mrpc", None), ("stsb", None), ("swag", None), ("squad1.1", None),
    ("conll2003", None), ("mrpc", "bilstm"), ("conll2003", "concat_last_four")])
def test_finetuning_steps_compile(checkpoint, deep_checkpoint, task, variant):
    spec, batch = TASKS[task], 2
    shape = (batch, len(spec.labels), T) if spec.kind == tasks.MULTIPLE_CHOICE else (batch, T)
    if variant == "concat_last_four":  # what a feature-based run trains: the tagger
        hidden = deep_checkpoint.config.hidden_size
        model = task_models.build_tagger(spec, 4, hidden, variant, 8, 0.1)
        inputs = {"layers": np.random.default_rng(0).normal(
                      size=(batch, T, 4, hidden)).astype("float32"),
                  "sentence_mask": np.ones((batch, T), "int32")}
    else:
        encoder = task_models.build_encoder(checkpoint, 0.1)
        model = task_models.build_model(spec, encoder, T, 0.1, head=variant or "dense",
                                        bilstm_units=8)
        inputs = random_inputs(shape)
    task_models.compile_model(model, spec.kind, keras.optimizers.AdamW(1e-3))
    model.jit_compile = True
    loss = model.train_on_batch(inputs, _labels(task, batch))
    assert np.all(np.isfinite(loss))
    outputs = model.predict_on_batch(inputs)
    assert all(np.all(np.isfinite(o)) for o in keras.tree.flatten(outputs))
