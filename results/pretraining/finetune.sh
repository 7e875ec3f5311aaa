#!/usr/bin/env bash
# Fine-tunes a pretraining run's export on MRPC and SST-2 through glue_suite, to show the
# exported checkpoint is usable: MRPC whole, 3 epochs; SST-2 10,000 examples, 2 epochs,
# seq 64; lr 1e-4 (both runs here, mini_nsp*/finetune/run.sh, call it with their paths).
#   bash results/pretraining/finetune.sh EXPORT_DIR OUTPUT_DIR LOG_PREFIX
# writes OUTPUT_DIR/{mrpc,sst2} (relative to the repository root) and
# LOG_PREFIX_{mrpc,sst2}.log. Needs the data directory: BERT_DATA_DIR (default ../shared/data).
set -u
CKPT=$1
OUT=$2
LOG=$3
cd "$(dirname "$0")/../.."
mkdir -p "$(dirname "$LOG")"
python -m glue_suite.run --task mrpc --init_checkpoint "$CKPT" --learning_rates 1e-4 --seeds 1 \
  --epochs 3 --max_seq_length 128 --verbose 2 --no_test_predictions \
  --cache_dir runs/glue_cache --output_dir $OUT/mrpc > ${LOG}_mrpc.log 2>&1
python -m glue_suite.run --task sst2 --init_checkpoint "$CKPT" --learning_rates 1e-4 --seeds 1 \
  --epochs 2 --max_seq_length 64 --max_train_examples 10000 --verbose 2 --no_test_predictions \
  --cache_dir runs/glue_cache --output_dir $OUT/sst2 > ${LOG}_sst2.log 2>&1
