#!/usr/bin/env bash
# Fine-tune the BERT-Mini pretrained here (export of results/pretraining/mini_nsp_2600/command.sh)
# on MRPC and SST-2 through glue_suite, to show the exported checkpoint is usable.
# Needs the data directory: BERT_DATA_DIR=../shared/data bash results/pretraining/mini_nsp_2600/finetune/run.sh
exec bash "$(dirname "$0")/../../finetune.sh" "${CKPT:-runs/pt_mini_2600/export}" \
  results/pretraining/mini_nsp_2600/finetune runs/ft_mini2600
