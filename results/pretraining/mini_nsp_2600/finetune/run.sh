#!/usr/bin/env bash
# Fine-tune the BERT-Mini pretrained here (export of results/pretraining/mini_nsp_2600/command.sh)
# on MRPC and SST-2 through glue_suite, to show the exported checkpoint is usable.
set -u
# Needs the data directory: BERT_DATA_DIR=../shared/data bash results/pretraining/mini_nsp_2600/finetune/run.sh
cd "$(dirname "$0")/../../../.."
CKPT=${CKPT:-/tmp/pt_mini_2600/export}
OUT=results/pretraining/mini_nsp_2600/finetune
python -m glue_suite.run --task mrpc --init_checkpoint "$CKPT" --learning_rates 1e-4 --seeds 1 \
  --epochs 3 --max_seq_length 128 --verbose 2 --no_test_predictions \
  --cache_dir /tmp/glue_cache --output_dir $OUT/mrpc > /tmp/ft_mini2600_mrpc.log 2>&1
python -m glue_suite.run --task sst2 --init_checkpoint "$CKPT" --learning_rates 1e-4 --seeds 1 \
  --epochs 2 --max_seq_length 64 --max_train_examples 10000 --verbose 2 --no_test_predictions \
  --cache_dir /tmp/glue_cache --output_dir $OUT/sst2 > /tmp/ft_mini2600_sst2.log 2>&1
