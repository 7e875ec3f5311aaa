#!/bin/sh
# Issue 14: which batch, peak rate and warmup leave BERT-Tiny's plateau soonest per training
# sequence? Eight arms at once on a lent GPU with the HF reference (`../parity/hf_reference.py`,
# learning-curve parity with bert_tf.pretrain within 0.6%), on a subset of the training
# records small enough for the GPU machine's transfer limit (`../parity/record_arrays.py`:
# 85,000 records in the recorded run, `README.md`). Every arm is the recipe
# (`b64_lr4e-3/pretrain_config.json`) with its batch, rate, warmup and seeds changed and its
# schedule sized to 500,000 sequences, what 100 minutes of float32 Tiny buy on the AVX2 CPU
# (~84 sequences/s); held-out every 9,600 sequences; each arm stopped after SECONDS.
#
#   sh results/pretraining/recipe_search/gpu_arms.sh runs/gpu/records85k.npz OUTDIR [SECONDS]
ARRAYS=$1 DIR=$2 SECONDS_EACH=${3:-470} DEVICE=${DEVICE:-cuda}
BASE=results/pretraining/recipe_search/b64_lr4e-3/pretrain_config.json
mkdir -p "$DIR"

arm() {  # name batch learning_rate warmup seed (initialisation and data order)
  name=$1 batch=$2 lr=$3 warmup=$4 seed=$5
  python3 - "$BASE" "$DIR/$name.json" "$batch" "$lr" "$warmup" "$seed" <<'EOF'
import json, sys
base, out, batch, lr, warmup, seed = sys.argv[1:]
c = json.load(open(base))
c.update(global_batch_size=int(batch), learning_rate=float(lr), num_warmup_steps=int(warmup),
         num_train_steps=500000 // int(batch), eval_every=9600 // int(batch), seed=int(seed))
for key in ("command", "git", "hardware", "model_dir"):  # the base run's, not this arm's
    c.pop(key, None)
c["derived_from"] = base
json.dump(c, open(out, "w"), indent=1)
EOF
  PYTHONUNBUFFERED=1 timeout "$SECONDS_EACH" python3 results/pretraining/parity/hf_reference.py \
    --arrays "$ARRAYS" --pretrain_config "$DIR/$name.json" --device "$DEVICE" --threads 2 \
    --seed "$seed" --output_csv "$DIR/$name.csv" > "$DIR/$name.log" 2>&1 &
}

arm b64_lr4e-3_w300_s0 64 4e-3 300 0      # the recipe at this CPU's budget
arm b64_lr4e-3_w300_s1 64 4e-3 300 1
arm b32_lr4e-3_w600_s0 32 4e-3 600 0      # twice the updates per sequence, same step size
arm b32_lr4e-3_w600_s1 32 4e-3 600 1
arm b32_lr4e-3_w2000_s0 32 4e-3 2000 0
arm b16_lr4e-3_w1200_s0 16 4e-3 1200 0
arm b32_lr3e-3_w600_s0 32 3e-3 600 0
arm b64_lr6e-3_w1500_s0 64 6e-3 1500 0    # a higher rate with a longer warmup
wait
