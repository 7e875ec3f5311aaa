#!/usr/bin/env bash
# Fine-tune the BERT-Mini pretrained here (export of results/pretraining/mini_nsp/command.sh)
# on MRPC and SST-2 through glue_suite, to show the exported checkpoint is usable.
exec bash "$(dirname "$0")/../../finetune.sh" "${CKPT:-runs/pretrain_mini_ckpt/export}" \
  results/pretraining/mini_nsp/finetune runs/ft_mini
