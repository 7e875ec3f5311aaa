#!/bin/sh
# The recipe search's records: the cpu plan's document-disjoint split and settings
# (reproduce/scales.py TRAIN and HELDOUT; the same commands as its data runs), at
# SEQ=128 (20 predictions per sequence, the default) or SEQ=64 (10: 15% of 64), with the
# paper's 80/10/10 masking or, with MASK=100,0,0 (Table 8's rows), another mix: training
# records then go to train$SEQ-mask100-0-0 (held-out records stay 80/10/10, as in the plan).
# UNMASKED=1 writes the training records unmasked, for `pretrain --dynamic_masking`, to
# train$SEQ-unmasked (the held-out ones stay masked: every run is scored on the same masks).
# OBJECTIVE=no_nsp or ltr (Table 5's rows; default nsp) writes that objective's training and
# held-out records, to train$SEQ-$OBJECTIVE and heldout$SEQ-$OBJECTIVE, as the plan does.
set -e
D=$BERT_DATA_DIR/pretraining
V=$BERT_DATA_DIR/bert_vocab/bert-base-uncased/vocab.txt
OUT=${OUT:-runs/recipe}
SEQ=${SEQ:-128}
PREDICTIONS=$(( SEQ == 64 ? 10 : 20 ))
MASK=${MASK:-80,10,10}
. "$(dirname "$0")/records.sh"
OBJECTIVE=${OBJECTIVE:-nsp}
UNMASKED=${UNMASKED:-}
TRAIN=$(records_dir train "$SEQ" "$OBJECTIVE" "$([ -n "$UNMASKED" ] && echo unmasked || echo "$MASK" | tr , -)")
RATES=$(echo "$MASK" | awk -F, '{printf "%g,%g,%g", $1 / 100, $2 / 100, $3 / 100}')
common="--vocab_file $V --max_seq_length $SEQ --max_predictions_per_seq $PREDICTIONS --masked_lm_prob 0.15 --dupe_factor 1 --short_seq_prob 0.1 --objective $OBJECTIVE"
python -m bert_tf.create_pretraining_data $common --random_seed 12345 --num_workers 2 \
  --mask_rates "$RATES" ${UNMASKED:+--dynamic_masking} \
  --input_files "$D/wikipedia_sample/AA/wiki_0[0-8],$D/wikipedia_2015/AA/wiki_[0-4]?,$D/wikipedia_2015/AA/wiki_5[0-8],$D/gutenberg/*.txt" \
  --output_dir "$OUT/$TRAIN"
[ "$MASK" = 80,10,10 ] && [ -z "$UNMASKED" ] || exit 0  # held out: the 80/10/10 ones
python -m bert_tf.create_pretraining_data $common --random_seed 54321 --num_workers 1 \
  --input_files "$D/wikipedia_sample/AA/wiki_09,$D/wikipedia_2015/AA/wiki_59" \
  --output_dir "$OUT/$(records_dir heldout "$SEQ" "$OBJECTIVE" 80-10-10)"
