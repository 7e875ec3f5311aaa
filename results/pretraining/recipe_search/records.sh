# The recipe search's record directories under $OUT: one naming for data.sh, which writes
# them, and search.sh, which reads them. train or heldout, the sequence length, -OBJECTIVE
# unless nsp, then -maskA-B-C for a mix other than 80-10-10, or -unmasked.
records_dir() {  # split seq objective mix (80-10-10, A-B-C or unmasked)
  suffix=$([ "$3" = nsp ] || echo "-$3")
  case $4 in
    80-10-10) ;;
    unmasked) suffix=$suffix-unmasked ;;
    *) suffix=$suffix-mask$4 ;;
  esac
  echo "$1$2$suffix"
}
