#!/bin/sh
# The BERT-Tiny recipe search of issue #14: which learning rate, batch and sequence length
# leave the unigram plateau soonest on this 2-core CPU. Run from the repository root with
# BERT_DATA_DIR set; `sh search.sh NAME...` runs only the trials named; EXTRA_ARGS goes to
# every trial's bert_tf.pretrain (e.g. "--export_steps 600,1200" for attention_collapse.py).
# PRECISION (default mixed_bfloat16, the fastest with AMX or AVX-512 BF16) can be float32: on
# a CPU with AVX2 alone bfloat16 is emulated and 0.72x as fast (results/benchmark/README.md).
#
# Every trial is configured as a whole 100-minute run (its steps are what ~160 sequences/s
# buys in 100 minutes at its batch size, so its schedule is the one it would have), is
# stopped after TRIAL_SECONDS, and is compared with the others at equal sequences and
# minutes (summarize.py). The winner goes on from its checkpoint: rerun its trial with
# TRIAL_SECONDS=0 (no limit; pretrain resumes exactly).
#
# Data (the cpu plan's split and settings; 1.5 min each):
#   sh results/pretraining/recipe_search/data.sh; SEQ=64 sh results/pretraining/recipe_search/data.sh
#   MASK=100,0,0 sh results/pretraining/recipe_search/data.sh  (the trials with mask 100-0-0)
#   UNMASKED=1 sh results/pretraining/recipe_search/data.sh  (the trials with mask dynamic)
#   OBJECTIVE=no_nsp sh results/pretraining/recipe_search/data.sh  (the trials with
#   --objective no_nsp; ltr likewise)
. "$(dirname "$0")/records.sh"
V=$BERT_DATA_DIR/bert_vocab/bert-base-uncased/vocab.txt
TRIAL_SECONDS=${TRIAL_SECONDS:-540}
OUT=${OUT:-runs/recipe}
PRECISION=${PRECISION:-mixed_bfloat16}

trial() {  # name batch learning_rate steps warmup seq size mask [flags]
  name=$1 batch=$2 lr=$3 steps=$4 warmup=$5 seq=$6 size=$7 mask=${8%@*} flags=$9
  shards=part-*  # mask "MIX@GLOB": train on the shards GLOB matches, not all 31
  [ "$8" = "$mask" ] || shards=${8#*@}
  predictions=$(( seq == 64 ? 10 : 20 ))
  # A row's "--objective X" (the later flag wins) reads X's records (OBJECTIVE=X data.sh).
  objective=$(echo " $flags" | sed -n 's/.* --objective \([a-z_]*\).*/\1/p')
  objective=${objective:-nsp}
  mix=$mask
  if [ "$mask" = dynamic ]; then  # unmasked records (UNMASKED=1 data.sh), masked per batch
    mix=unmasked flags="$flags --dynamic_masking"
  fi
  train=$(records_dir train "$seq" "$objective" "$mix")
  heldout=$(records_dir heldout "$seq" "$objective" 80-10-10)
  timeout "$TRIAL_SECONDS" python -m bert_tf.pretrain --config "$size" --objective nsp \
    --train_files "$OUT/$train/$shards" --eval_files "$OUT/$heldout/part-*" \
    --vocab_file "$V" --model_dir "$OUT/$name" --global_batch_size "$batch" \
    --num_train_steps "$steps" --num_warmup_steps "$warmup" --learning_rate "$lr" \
    --max_seq_length "$seq" --max_predictions_per_seq "$predictions" \
    --precision "$PRECISION" --eval_steps $((2560 / batch)) \
    --eval_every $((19200 / batch)) --save_checkpoints_steps $((19200 / batch)) \
    --log_every $((6400 / batch)) --seed 0 $flags $EXTRA_ARGS
  echo "$name: exit $? (124: stopped by the timeout)"
}

# Mini's steps are what its ~45 sequences/s buy in 100 minutes (~270k sequences).
# The mask100_* trials: Table 8's 100/0/0 run collapsed at the recipe's lr 4e-3 (so did
# 0/0/100, and 80/10/10 at 8e-3); which rate or warmup keeps it learning? (~10 minutes
# each: TRIAL_SECONDS=600; README.md, "Table 8's 100/0/0 at other rates")
# The *_lr1.5e-3 trials: between 1e-3 (nothing collapses, 80/10/10 stays near the plateau
# for the whole 100 minutes) and 2e-3 (100/0/0 collapses); README.md, "80/10/10 at 1e-3".
# seq64_b64_lr4e-3: the recipe's batch and rate at sequence length 64, whose steps cost about
# half as much: does the plateau break after as many steps (then 100 minutes buy twice the
# steps after it) or after as many tokens? Its steps are the 1.92M sequences that the first
# seq-64 trial was given (README.md, "Sequence length 64 at the recipe's rate").
# The b16_* trials: batch 16 at 1e-3 has the recipe's rate per sequence (linear scaling:
# batch 32 at 2e-3 followed batch 64 at 4e-3) with the step size that kept 100/0/0 alive.
# Which does the collapse follow, the step size or the rate per sequence (mask100_b16_lr1e-3,
# ~10 minutes), and does the plateau break where 4e-3's did, by ~400k sequences
# (b16_lr1e-3)? Warmup: the recipe's 19k sequences.
# The trials with flags (2026-12-02; README.md, "Adam's beta2, the output bias, dropout"):
# the collapse at 4e-3 sets in by step 300, while the loss sits at the unigram entropy.
# Does RoBERTa's beta2 of 0.98 (steadier at high rates) prevent it, or an output bias that
# starts at the targets' log frequencies (the model starts on the plateau instead of
# reaching it through its weights)? And does either, or pretraining without dropout (a
# one-pass budget does not overfit), break 80/10/10's plateau sooner at 1e-3?
# The *_dynamic trials (2026-12-02; README.md, end of "Twice the rate without dropout"): the
# dropout-0 run ends 0.70 nats lower on its training loss than on held-out text after 3.2
# passes over the same static masks. Do fresh masks every pass take that gap back?
# b64_lr2e-3_dropout0 (2026-12-03): without dropout 1e-3 broke the plateau at 300-350k
# sequences and ended at 28.1%; does twice the rate (80/10/10 at 2e-3 did not collapse
# with dropout, only 100/0/0 did) break it sooner and end higher?
# mask100_b64_lr1e-3_dropout0 (2026-12-03): does Table 8's 100/0/0 row, which survived 1e-3
# with dropout 0.1, also survive it without dropout (~10 minutes, with exports for
# attention_collapse.py)?
# mini_b64_lr1e-3_dropout0 (2026-12-03): Tiny left the plateau at 300-350k sequences only
# without dropout; does Mini, without dropout, leave it within its 100-minute 269k?
# b64_lr1e-3_dropout0_seed1 (2026-12-03): a second pretraining seed of the best Tiny run (the
# later --seed wins over trial()'s --seed 0): is its 300-350k break, and its 28.1%, typical?
# b64_lr1e-3_dropout0_24k (2026-12-03): the best Tiny run's settings on a longer schedule,
# 24,000 x 64 = 1.54M sequences (~2h15 at the AMX Xeon's ~190 sequences/s, ~80 minutes at
# the AVX-512 BF16 EPYC's 321): it ended at 28.1% after 960k, still rising as its rate
# decayed; how many sequences does 30% take?
# b64_lr5e-4_dropout0 (2026-12-04): without dropout 2e-3 broke the plateau later than 1e-3
# (380-440k sequences against 300-350k); does half of 1e-3 break it sooner still? An earlier
# break is what Mini's 269-366k sequences need.
# b64_lr1e-3_dropout0_shards10 (2026-12-04): every break without dropout so far came soon
# after the first pass over the 303k static records ended (1e-3 at 300-350k; the dynamic
# run, whose second pass has fresh masks, at ~470-500k): does a second sight of the same
# masked instances set it off? Then 10 of the 31 shards (100k records) break it at ~100-150k.
# b64_lr1e-3_dropout0_18k (2026-12-04): the best Tiny run's settings on the schedule that
# 100 minutes buy on the AMX Xeon alone (~200 sequences/s with the evaluations; 18,000 x 64 =
# 1.15M sequences): does the issue's 30% lie within 100 minutes of this machine?
# mask0-0-100_b64_lr1e-3_dropout0 (2026-12-04): Table 8's other collapsing row, 0/0/100
# (data: MASK=0,0,100 data.sh), under the dropout-0 recipe, to past the 300-350k sequences
# where 80/10/10 broke: adopting dropout 0 needs every row to survive it.
# no_nsp_b64_lr1e-3_dropout0 (2026-12-04): Table 5's No NSP row (data: OBJECTIVE=no_nsp
# data.sh), whose first-layer attention collapsed at 4e-3, under the same recipe, as far.
# ltr_b64_lr1e-3_dropout0 (2026-12-04): Table 5's LTR row (OBJECTIVE=ltr data.sh; the plan's
# 20 sampled next-token predictions per sequence), the last row unchecked without dropout.
# b64_lr1e-3_dropout0_dynamic_22k (2026-12-06): the best Tiny run's settings with fresh masks
# every pass (data: UNMASKED=1 data.sh) on the schedule 100 minutes buy on the AMX Xeon alone
# (~240 sequences/s with the evaluations: 22,000 x 64 = 1.41M sequences). Both static-mask
# schedules ended at 28.0-28.1% with the training loss 0.65-0.70 nats below the held-out one
# after 3-4 passes over the same masks: does taking that memorising away, with the longer
# schedule's extra sequences after the break, reach the issue's 30%?
# mask100_b64_lr1e-3_dropout0_dynamic_22k (2026-12-06): Table 8's 100/0/0 row under the
# plan's new recipe (fresh masks, 22,000 steps; the same unmasked records, masked 100/0/0
# per batch): on static masks it stayed on the plateau through 960k sequences (the plan's
# unit 5); does it leave it by the ~480k where 80/10/10 did with fresh masks?
# name              batch lr    steps  warmup seq size mask     flags
TRIALS="
b64_lr1e-3          64    1e-3  15000  300    128 tiny 80-10-10
b64_lr2e-3          64    2e-3  15000  300    128 tiny 80-10-10
b64_lr4e-3          64    4e-3  15000  300    128 tiny 80-10-10
b32_lr2e-3          32    2e-3  30000  600    128 tiny 80-10-10
b64_lr8e-3          64    8e-3  15000  300    128 tiny 80-10-10
seq64_b128_lr8e-3   128   8e-3  15000  300    64  tiny 80-10-10
mini_b64_lr1e-3     64    1e-3  4200   300    128 mini 80-10-10
mask100_b64_lr4e-3  64    4e-3  15000  300    128 tiny 100-0-0
mask100_b64_lr2e-3  64    2e-3  15000  300    128 tiny 100-0-0
mask100_b64_lr1e-3  64    1e-3  15000  300    128 tiny 100-0-0
mask100_b64_lr4e-3_w1500 64 4e-3 15000 1500   128 tiny 100-0-0
b64_lr1.5e-3        64    1.5e-3 15000 300    128 tiny 80-10-10
mask100_b64_lr1.5e-3 64   1.5e-3 15000 300    128 tiny 100-0-0
seq64_b64_lr4e-3    64    4e-3  30000  300    64  tiny 80-10-10
mask100_b16_lr1e-3  16    1e-3  60000  1200   128 tiny 100-0-0
b16_lr1e-3          16    1e-3  60000  1200   128 tiny 80-10-10
mask100_b64_lr4e-3_b2-0.98 64 4e-3 15000 300   128 tiny 100-0-0  --adam_beta2 0.98
mask100_b64_lr4e-3_unigram 64 4e-3 15000 300   128 tiny 100-0-0  --output_bias_init unigram
b64_lr1e-3_unigram  64    1e-3  15000  300    128 tiny 80-10-10 --output_bias_init unigram
b64_lr1e-3_dropout0 64    1e-3  15000  300    128 tiny 80-10-10 --dropout 0
b64_lr1e-3_dropout0_dynamic 64 1e-3 15000 300  128 tiny dynamic  --dropout 0
b64_lr1e-3_dropout0_dynamic_22k 64 1e-3 22000 300 128 tiny dynamic --dropout 0
mask100_b64_lr1e-3_dropout0_dynamic_22k 64 1e-3 22000 300 128 tiny dynamic --dropout 0 --mask_rates 1,0,0
mask100_b64_lr1e-3_dropout0_dynamic 64 1e-3 15000 300 128 tiny dynamic --dropout 0 --mask_rates 1,0,0
b64_lr2e-3_dropout0 64    2e-3  15000  300    128 tiny 80-10-10 --dropout 0
mask100_b64_lr1e-3_dropout0 64 1e-3 15000 300  128 tiny 100-0-0  --dropout 0
mini_b64_lr1e-3_dropout0 64 1e-3  4200   300    128 mini 80-10-10 --dropout 0
b64_lr1e-3_dropout0_seed1 64 1e-3 15000 300   128 tiny 80-10-10 --dropout 0 --seed 1
b64_lr1e-3_dropout0_24k 64 1e-3 24000 300   128 tiny 80-10-10 --dropout 0
b64_lr5e-4_dropout0 64    5e-4  15000  300    128 tiny 80-10-10 --dropout 0
b64_lr1e-3_dropout0_shards10 64 1e-3 15000 300 128 tiny 80-10-10@part-0000[0-9]-* --dropout 0
b64_lr1e-3_dropout0_18k 64 1e-3 18000 300   128 tiny 80-10-10 --dropout 0
mask0-0-100_b64_lr1e-3_dropout0 64 1e-3 15000 300 128 tiny 0-0-100 --dropout 0
no_nsp_b64_lr1e-3_dropout0 64 1e-3 15000 300 128 tiny 80-10-10 --dropout 0 --objective no_nsp
ltr_b64_lr1e-3_dropout0 64 1e-3 15000 300 128 tiny 80-10-10 --dropout 0 --objective ltr --ltr_predictions 20
"
echo "$TRIALS" | while read -r name batch lr steps warmup seq size mask flags; do
  [ -n "$name" ] || continue
  if [ $# -gt 0 ] && ! echo " $* " | grep -q " $name "; then continue; fi
  trial "$name" "$batch" "$lr" "$steps" "$warmup" "$seq" "$size" "$mask" "$flags"
done
