#!/bin/sh
# The BERT-Tiny recipe search of issue #14: which learning rate, batch and sequence length
# leave the unigram plateau soonest on this 2-core CPU. Run from the repository root with
# BERT_DATA_DIR set; `sh search.sh NAME...` runs only the trials named.
#
# Every trial is configured as a whole 100-minute run (its steps are what ~160 sequences/s
# buys in 100 minutes at its batch size, so its schedule is the one it would have), is
# stopped after TRIAL_SECONDS, and is compared with the others at equal sequences and
# minutes (summarize.py). The winner goes on from its checkpoint: rerun its trial with
# TRIAL_SECONDS=0 (no limit; pretrain resumes exactly).
#
# Data (the cpu plan's split and settings; 1.5 min each):
#   sh results/pretraining/recipe_search/data.sh; SEQ=64 sh results/pretraining/recipe_search/data.sh
V=$BERT_DATA_DIR/bert_vocab/bert-base-uncased/vocab.txt
TRIAL_SECONDS=${TRIAL_SECONDS:-540}
OUT=${OUT:-runs/recipe}

trial() {  # name batch learning_rate steps warmup seq size
  name=$1 batch=$2 lr=$3 steps=$4 warmup=$5 seq=$6 size=$7
  predictions=$(( seq == 64 ? 10 : 20 ))
  timeout "$TRIAL_SECONDS" python -m bert_tf.pretrain --config "$size" --objective nsp \
    --train_files "$OUT/train$seq/part-*" --eval_files "$OUT/heldout$seq/part-*" \
    --vocab_file "$V" --model_dir "$OUT/$name" --global_batch_size "$batch" \
    --num_train_steps "$steps" --num_warmup_steps "$warmup" --learning_rate "$lr" \
    --max_seq_length "$seq" --max_predictions_per_seq "$predictions" \
    --precision mixed_bfloat16 --eval_steps $((2560 / batch)) \
    --eval_every $((19200 / batch)) --save_checkpoints_steps $((19200 / batch)) \
    --log_every $((6400 / batch)) --seed 0
  echo "$name: exit $? (124: stopped by the timeout)"
}

# Mini's steps are what its ~45 sequences/s buy in 100 minutes (~270k sequences).
# name          batch lr    steps  warmup seq size
TRIALS="
b64_lr1e-3      64    1e-3  15000  300    128 tiny
b64_lr2e-3      64    2e-3  15000  300    128 tiny
b64_lr4e-3      64    4e-3  15000  300    128 tiny
b32_lr2e-3      32    2e-3  30000  600    128 tiny
b64_lr8e-3      64    8e-3  15000  300    128 tiny
seq64_b128_lr8e-3 128 8e-3  15000  300    64  tiny
mini_b64_lr1e-3 64    1e-3  4200   300    128 mini
"
echo "$TRIALS" | while read -r name batch lr steps warmup seq size; do
  [ -n "$name" ] || continue
  if [ $# -gt 0 ] && ! echo " $* " | grep -q " $name "; then continue; fi
  trial "$name" "$batch" "$lr" "$steps" "$warmup" "$seq" "$size"
done
