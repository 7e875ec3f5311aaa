#!/bin/sh
# Data: $BERT_DATA_DIR (default ../shared/data, where this run read it).
# Run from the repository root. BERT-Mini (L4 H256 A4), MLM + NSP, on the 2-core CPU of
# the build machine (shared with other jobs), ~65 minutes. Data: the output of
# python -m bert_tf.create_pretraining_data over all of ../shared/data/pretraining
# (runs/pretrain_data_128/metadata.json): 31 shards; shards 0-29 train, shard 30
# (9,924 instances) is held out for the masked-LM perplexity.
# lr 5e-4 rather than the paper's 1e-4 (for 1M steps at batch 256): this run has 1,200.
# Rerunning the same command resumes from the last checkpoint.
# History: started with --num_train_steps 1200; at step 500 (checkpoint ckpt-500) it was
# stopped and resumed with --num_train_steps 1200 to finish inside the build session, so
# the linear decay steepened at step 500 (lr 3.75e-4 -> 2.92e-4).
# Scratch (shards, checkpoints, export, log) under runs/, which is not committed; the run
# itself wrote them to a temporary directory, which its records name <elsewhere>/...
mkdir -p runs
nohup python -m bert_tf.pretrain --config mini --objective nsp \
  --train_files 'runs/pretrain_data_128/part-000[0-2]*' \
  --eval_files runs/pretrain_data_128/part-00030-of-00031.tfrecord --eval_steps 40 \
  --vocab_file ${BERT_DATA_DIR:-../shared/data}/bert_vocab/bert-base-uncased/vocab.txt \
  --model_dir results/pretraining/mini_nsp \
  --checkpoint_dir runs/pretrain_mini_ckpt/checkpoints --export_dir runs/pretrain_mini_ckpt/export \
  --strategy cpu --precision mixed_bfloat16 --global_batch_size 64 \
  --max_seq_length 128 --max_predictions_per_seq 20 \
  --num_train_steps 1200 --num_warmup_steps 200 --learning_rate 5e-4 \
  --save_checkpoints_steps 250 --keep_checkpoints 3 --eval_every 250 --log_every 25 \
  --seed 12345 >> runs/pretrain_mini.log 2>&1 &
