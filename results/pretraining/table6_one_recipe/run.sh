#!/bin/sh
# Table 6 at one recipe (issue 14): BERT-Tiny pretrained with the cpu plan's Mini recipe
# (batch 64, lr 1e-3, warmup 300, 4,200 steps = 269k sequences, seed 12345, float32; the
# command of results/runs/cpu.pretrain.mini-nsp with --config tiny), then fine-tuned as the
# plan fine-tunes Mini (results/runs/cpu.finetune.mini-nsp.*), and compared with Mini
# (compare.py). Run from the repository root with BERT_DATA_DIR set, after the plan's data
# runs (runs/cpu.data.nsp, runs/cpu.data.heldout-nsp: `python -m reproduce.all --scale cpu`
# makes them first). ~55 minutes of pretraining and ~20 of fine-tuning on the 2-core CPU.
set -e
V=$BERT_DATA_DIR/bert_vocab/bert-base-uncased/vocab.txt
OUT=runs/table6
python -m bert_tf.pretrain --config tiny --objective nsp --train_files 'runs/cpu.data.nsp/part-*' \
  --vocab_file "$V" --model_dir $OUT/tiny_mini_recipe --strategy cpu --precision float32 \
  --global_batch_size 64 --num_train_steps 4200 --learning_rate 0.001 --num_warmup_steps 300 \
  --max_seq_length 128 --max_predictions_per_seq 20 --save_checkpoints_steps 600 \
  --eval_files 'runs/cpu.data.heldout-nsp/part-*' --eval_every 600 --eval_steps 40 --log_every 100
for task in mnli mrpc sst2; do
  python -m glue_suite.run --task $task --init_checkpoint $OUT/tiny_mini_recipe/export \
    --data_dir "$BERT_DATA_DIR" --output_dir $OUT/finetune.$task --cache_dir runs/glue_cache \
    --strategy cpu --precision float32 --seeds 3 --verbose 2 --learning_rates 0.0001 \
    $([ $task = sst2 ] && echo --max_train_examples 10000)
done
python results/pretraining/table6_one_recipe/compare.py --collect $OUT
