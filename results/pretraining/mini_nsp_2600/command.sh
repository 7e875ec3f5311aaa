#!/bin/sh
# Data: $BERT_DATA_DIR (default ../shared/data, where this run read it).
# Run from the repository root. BERT-Mini (L4 H256 A4), MLM + NSP, 2,600 steps x 64
# sequences x 128 tokens (166k sequences, 21.3M tokens) on the 2-core CPU of the build
# machine, which it shared with the reproduce harness for most of the run.
# Data (results/pretraining/README.md has the commands): the document-disjoint split of
# ../shared/data/pretraining: training shards from every file except the data README's two
# held-out Wikipedia files (300,794 instances); the held-out set (4,668 instances) is made
# from wiki_09 and wiki_59 only, so no held-out document was seen in training.
# lr 5e-4 rather than the paper's 1e-4 (for 1M steps at batch 256): this run has 2,600.
# Rerunning the same command resumes from the last checkpoint.
# Scratch (shards, checkpoints, export, log) under runs/, which is not committed; the run
# itself wrote them to a temporary directory, which its records name <elsewhere>/...
mkdir -p runs
nohup python -m bert_tf.pretrain --config mini --objective nsp \
  --train_files 'runs/pt_train_128/part-*.tfrecord' \
  --eval_files 'runs/pt_heldout_128/part-*.tfrecord' --eval_steps 40 \
  --vocab_file ${BERT_DATA_DIR:-../shared/data}/bert_vocab/bert-base-uncased/vocab.txt \
  --model_dir results/pretraining/mini_nsp_2600 \
  --checkpoint_dir runs/pt_mini_2600/checkpoints --export_dir runs/pt_mini_2600/export \
  --strategy cpu --precision mixed_bfloat16 --global_batch_size 64 \
  --max_seq_length 128 --max_predictions_per_seq 20 \
  --num_train_steps 2600 --num_warmup_steps 200 --learning_rate 5e-4 \
  --save_checkpoints_steps 300 --keep_checkpoints 3 --eval_every 300 --log_every 25 \
  --seed 12345 >> runs/pt_mini_2600.log 2>&1 &
