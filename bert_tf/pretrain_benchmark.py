"""Pretraining throughput: `bert_tf.pretrain`'s training calls on their input pipeline,
the same compiled step on one in-memory batch, and tf-models-official's pretrainer,
side by side in one process.

    python -m bert_tf.pretrain_benchmark --size tiny --batch_size 64 \\
        --train_files 'pretrain_128/part-*' --vocab_file vocab.txt \\
        --precision float32,mixed_bfloat16 --rounds 8 --steps 5

Contenders (each round runs each for --steps optimizer steps, one call per
--steps_per_execution steps as `pretrain` makes them, in an order rotated every round):
  pretrain    `trainer.Trainer.run_steps` on the records, as `python -m bert_tf.pretrain`
              runs them: encoder + MLM/NSP heads, loss, clipping, AdamW, input pipeline
  step_alone  the same Trainer's compiled step on one batch held in memory (no input
              pipeline): pretrain / step_alone is the share the pipeline leaves
  tfm         tf-models-official's BertPretrainerV2 (its BertEncoder, MaskedLM and a
              next_sentence ClassificationHead, as in its BERT pretraining config) on that
              same batch: the masked-LM task's losses and accuracies, gradients clipped to
              global norm 1, and its AdamWeightDecay (weight decay 0.01, not on LayerNorm
              or biases). Its trainable parameters are as many as ours: its NSP head's
              own dense layer stands for our pooler, and its unused pooler is left out.
With several --precision values every contender runs in each, all side by side, and the
ratios add each contender's bf16 over its f32: the faster precision for this size.
Ratios are of median examples/s, with 95% bootstrap intervals over rounds (`timing`).
Issue #16's goals: pretrain / step_alone >= 0.9 (the input pipeline costs < 10%) and
pretrain / tfm >= 1.1.
"""

import argparse
import tempfile

import tensorflow as tf

from bert_tf import distribute, timing
from bert_tf.config import BertConfig, SIZES
from bert_tf.pretrain_config import PretrainConfig
from bert_tf.trainer import Trainer

SHORT = {"float32": "f32", "mixed_bfloat16": "bf16"}


def ours(args, precision: str, model_dir: str):
    """-> (Trainer, callables running `args.steps` steps on the records / on one batch, the
    batch as numpy)."""
    config = PretrainConfig(
        model_size=args.size, objective="nsp", train_files=args.train_files,
        vocab_file=args.vocab_file, model_dir=model_dir, global_batch_size=args.batch_size,
        max_seq_length=args.seq_length, max_predictions_per_seq=args.max_predictions,
        num_train_steps=1_000_000, num_warmup_steps=10_000, precision=precision,
        steps_per_execution=args.steps_per_execution, jit_compile=args.jit_compile)
    trainer = Trainer(config, distribute.create_strategy("cpu"))
    trainer.restore()  # a fresh model_dir: step 0, phase 1's input pipeline opened
    (pipeline,) = trainer.iterators  # one CPU: one input pipeline
    batch = next(pipeline)
    in_memory = [iter(tf.data.Dataset.from_tensors(batch).repeat())]

    def steps(iterators):
        calls, rest = divmod(args.steps, args.steps_per_execution)
        for n in [args.steps_per_execution] * calls + ([rest] if rest else []):
            trainer.run_steps(n, iterators)

    return (trainer, lambda: steps(None), lambda: steps(in_memory),
            {name: value.numpy() for name, value in batch.items()})


def tfm(config: BertConfig, batch: dict, precision: str, steps: int):
    """tf-models-official's BERT pretraining step on `batch` -> (a callable running
    `steps` steps, its number of trainable parameters)."""
    import tf_keras
    from official.modeling.optimization import legacy_adamw
    from official.nlp.modeling import layers, models, networks

    gelu = lambda x: tf_keras.activations.gelu(x, approximate=False)  # BERT's exact GELU
    init = lambda: tf_keras.initializers.TruncatedNormal(stddev=config.initializer_range)
    tf_keras.mixed_precision.set_global_policy(precision)
    encoder = networks.BertEncoder(
        vocab_size=config.vocab_size, hidden_size=config.hidden_size,
        num_layers=config.num_hidden_layers, num_attention_heads=config.num_attention_heads,
        max_sequence_length=config.max_position_embeddings,
        type_vocab_size=config.type_vocab_size, inner_dim=config.intermediate_size,
        inner_activation=gelu, output_dropout=config.hidden_dropout_prob,
        attention_dropout=config.attention_probs_dropout_prob, initializer=init(),
        dict_outputs=True)
    model = models.BertPretrainerV2(
        encoder_network=encoder, mlm_activation=gelu, mlm_initializer=init(),
        classification_heads=[layers.ClassificationHead(
            inner_dim=config.hidden_size, num_classes=2, dropout_rate=0.1,
            initializer=init(), name="next_sentence")])
    optimizer = legacy_adamw.AdamWeightDecay(
        1e-4, weight_decay_rate=0.01, epsilon=1e-6, gradient_clip_norm=1.0,
        exclude_from_weight_decay=["LayerNorm", "layer_norm", "bias"])
    inputs = {"input_word_ids": batch["input_ids"], "input_mask": batch["input_mask"],
              "input_type_ids": batch["segment_ids"],
              "masked_lm_positions": batch["masked_lm_positions"]}
    inputs = {name: tf.constant(value) for name, value in inputs.items()}
    labels = tf.constant(batch["masked_lm_ids"])
    weights = tf.constant(batch["masked_lm_weights"])
    nsp_labels = tf.constant(batch["next_sentence_labels"][:, 0])
    model(inputs)  # builds the heads' layers, in the global policy
    tf_keras.mixed_precision.set_global_policy("float32")
    unused = {id(v) for v in encoder.pooler_layer.trainable_variables}  # no gradient
    variables = [v for v in model.trainable_variables if id(v) not in unused]

    @tf.function
    def train_step():  # as official.nlp.tasks.masked_lm.MaskedLMTask
        with tf.GradientTape() as tape:
            outputs = model(inputs, training=True)
            mlm_logits = tf.cast(outputs["mlm_logits"], tf.float32)
            nsp_logits = tf.cast(outputs["next_sentence"], tf.float32)
            mlm = tf_keras.losses.sparse_categorical_crossentropy(labels, mlm_logits,
                                                                  from_logits=True)
            mlm_loss = tf.math.divide_no_nan(tf.reduce_sum(mlm * weights),
                                             tf.reduce_sum(weights))
            loss = mlm_loss + tf.reduce_mean(tf_keras.losses.sparse_categorical_crossentropy(
                nsp_labels, nsp_logits, from_logits=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        correct = tf.cast(tf.equal(tf.argmax(mlm_logits, -1, tf.int32), labels), tf.float32)
        nsp_correct = tf.equal(tf.argmax(nsp_logits, -1, tf.int32), nsp_labels)
        return loss, tf.reduce_sum(correct * weights), tf.reduce_sum(tf.cast(nsp_correct,
                                                                             tf.float32))

    def run():
        for _ in range(steps):
            float(train_step()[0])

    return run, sum(int(tf.size(v)) for v in variables)


def build_contenders(args, model_dir: str) -> dict:
    """{name: callable running args.steps steps}: pretrain, step_alone and tfm per
    precision (named "pretrain f32" etc. when there are several)."""
    contenders = {}
    for precision in args.precision:
        suffix = f" {SHORT[precision]}" if len(args.precision) > 1 else ""
        directory = f"{model_dir}/{precision}"
        trainer, pretrain, step_alone, batch = ours(args, precision, directory)
        contenders[f"pretrain{suffix}"] = pretrain
        contenders[f"step_alone{suffix}"] = step_alone
        if not args.no_tfm:
            contenders[f"tfm{suffix}"] = tfm(trainer.model.config, batch, precision,
                                              args.steps)[0]
    return contenders


def ratio_pairs(names: list, precisions: list) -> list:
    """The ratios to print: the pipeline's share, ours against tfm, and (with several
    precisions) each contender's bf16 over its f32."""
    pairs = []
    suffixes = [f" {SHORT[p]}" for p in precisions] if len(precisions) > 1 else [""]
    for suffix in suffixes:
        pairs += [(f"pretrain{suffix}", f"step_alone{suffix}"), (f"pretrain{suffix}", f"tfm{suffix}"),
                  (f"step_alone{suffix}", f"tfm{suffix}")]
    if len(precisions) > 1:
        pairs += [(f"{kind} bf16", f"{kind} f32") for kind in ("pretrain", "step_alone", "tfm")]
    return [(a, b) for a, b in pairs if a in names and b in names]


def run(args) -> dict:
    """Builds, warms up and times the contenders; prints and returns the results."""
    print("\n".join(timing.header("bert_tf.pretrain_benchmark")), flush=True)
    with tempfile.TemporaryDirectory() as model_dir:
        contenders = build_contenders(args, model_dir)
        for contender in contenders.values():
            for _ in range(args.warmup):
                contender()
        seconds = timing.run_rounds(contenders, args.rounds, log=lambda s: print(s, flush=True))
    rates = {name: [args.steps * args.batch_size / s for s in values]
             for name, values in seconds.items()}
    print(f"\n{args.size} seq={args.seq_length} predictions={args.max_predictions} "
          f"batch={args.batch_size} steps_per_execution={args.steps_per_execution} "
          f"steps/round={args.steps} rounds={args.rounds}")
    width = max(len(name) for name in rates)
    print(f"{'contender':<{width}} {'examples/s':>10} {'min':>8} {'max':>8}")
    for name, values in rates.items():
        median, low, high = timing.spread(values)
        print(f"{name:<{width}} {median:>10.2f} {low:>8.2f} {high:>8.2f}")
    ratios = {}
    for a, b in ratio_pairs(list(rates), args.precision):
        value, low, high = ratios[f"{a} / {b}"] = timing.bootstrap_ratio(rates[a], rates[b])
        print(f"ratio {a} / {b} = {value:.3f} (95% CI {low:.3f}-{high:.3f})")
    return {"examples_per_second": rates, "ratios": ratios}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bert_tf.pretrain_benchmark", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", default="tiny", choices=list(SIZES))
    p.add_argument("--train_files", required=True, help="pretraining records (phase-1 shape)")
    p.add_argument("--vocab_file", required=True)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--seq_length", type=int, default=128)
    p.add_argument("--max_predictions", type=int, default=20)
    p.add_argument("--precision", default="float32",
                   help="float32, mixed_bfloat16 or both, comma-separated (side by side)")
    p.add_argument("--steps", type=int, default=5, help="optimizer steps per contender and round")
    p.add_argument("--steps_per_execution", type=int, default=1)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--warmup", type=int, default=1, help="untimed rounds first")
    p.add_argument("--jit_compile", action="store_true", help="XLA for our step only")
    p.add_argument("--no_tfm", action="store_true", help="skip tf-models-official")
    return p


def main(argv=None) -> None:
    parser = build_parser()
    args = parser.parse_args(argv)
    args.precision = [p for p in args.precision.split(",") if p]
    if not args.precision or set(args.precision) - set(SHORT):
        parser.error(f"--precision: comma-separated {' or '.join(SHORT)}")
    if args.rounds < 2:
        parser.error("--rounds must be at least 2 (a spread and an interval need rounds)")
    run(args)


if __name__ == "__main__":
    main()
