# Are a pretraining process's two intra-op threads worth two processes? Rotated rounds of
# A = one process with 2 intra-op threads, B = two processes at once with 1 thread each;
# Tiny pretraining in float32, `bert_tf.pretrain_benchmark`'s "pretrain" contender (the
# trainer on its input pipeline), median examples/s of each process.
#     bash results/benchmark/pretrain_threads.sh ['runs/cpu.data.heldout-nsp/part-*']
set -e
records=${1:-'runs/cpu.data.heldout-nsp/part-*'}
echo "command: bash results/benchmark/pretrain_threads.sh '$records'; commit $(git rev-parse --short HEAD); $(date -u +%FT%TZ)"
B="python -m bert_tf.pretrain_benchmark --size tiny --batch_size 64 --train_files '$records' --vocab_file \$BERT_DATA_DIR/bert_vocab/bert-base-uncased/vocab.txt --precision float32 --rounds 3 --steps 20 --no_tfm"
out=$(mktemp -d)
A() { eval TF_NUM_INTRAOP_THREADS=2 $B 2>&1 | awk '/^pretrain /{print "A one process x 2 threads:", $2}'; }
Bp() {
  eval TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 $B > $out/p1.txt 2>&1 &
  eval TF_NUM_INTRAOP_THREADS=1 TF_NUM_INTEROP_THREADS=1 $B > $out/p2.txt 2>&1; wait
  echo "B two processes x 1 thread: $(awk '/^pretrain /{s+=$2; printf "%s + ", $2} END{printf "= %.2f", s}' $out/p1.txt $out/p2.txt)"
}
for round in 1 2 3; do echo "round $round"; if [ $((round % 2)) = 1 ]; then A; Bp; else Bp; A; fi; done
