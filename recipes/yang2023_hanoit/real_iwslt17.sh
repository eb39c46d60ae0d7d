#!/usr/bin/env bash
# Real documents end to end through the CLI, at CPU size: the IWSLT-2017 En→De TED talks of Maruf, Martins &
# Haffari (2019), the set Yang et al.'s HanoiT reports on (Table 1), for a sentence-level Transformer, a
# concatenation model and HanoiT.
#
#   prepare maruf --moses --joint (BPE) -> train each system a fixed number of updates -> `ctxmt evaluate -c CKPT
#   --split test --tokenize none` (translates the test talks as documents; tokenized case-sensitive BLEU on
#   Moses-tokenized text, as the paper reports) -> a table of BLEU, chrF and wall times.
#
# Splits: Maruf et al.'s training talks are not public, so train = the first 88 of their 93 dev talks (8596
# sentences), valid = the last 5 dev talks (371 sentences; whole talks held out, so no context crosses into them),
# test = their 23 test talks (2271 sentences).
# Systems, all at the quickstart's dims (d_model 128, ffn 256, 4 heads, 2 encoder + 2 decoder layers) from
# the packaged quickstart recipes (quickstart/NAME, `ctxmt recipes list quickstart`) with --set:
#   sentence       the sentence-level Transformer (Table 1 'Transformer')
#   concat         the previous source sentence concatenated, learned segment embeddings, target = the current
#                  sentence (ECT-like 2-to-1, Table 1 'ECT' with 1 previous sentence)
#   hanoit         HanoiT offline (1 previous + 1 next), 1 unified + 1 selection layer, q 0.2
#   hanoit_online  HanoiT online (1 previous), otherwise the same (Table 4; not in the default SYSTEMS)
# Small on purpose (a joint 8000-piece BPE where the paper has 40K on the full training set): the point is that
# the real path works, not the paper's BLEU. The kept share of context tokens after HanoiT's selection layer
# (Figure 4's statistic) is read from the last validation record of its metrics.jsonl.
#
# Usage (from anywhere; the checkout is the one holding this script, in recipes/yang2023_hanoit/):
#   bash recipes/yang2023_hanoit/real_iwslt17.sh       # the full run: 2000 updates per system, beam 4
#   UPDATES=20 TEST_TALKS=2 BEAM=1 THREADS=1 bash recipes/yang2023_hanoit/real_iwslt17.sh   # a smoke run
# With an installed ctxmt and no checkout: `ctxmt recipes copy yang2023_hanoit -o DIR`, then
#   MARUF=... bash DIR/real_iwslt17.sh (the current folder stands in for the checkout).
# Settings (environment): MARUF (folder of Maruf's IWSLT2017 files; default ../shared/data/maruf2019/IWSLT2017
#   beside the checkout), OUT (work folder, default runs/yang2023_hanoit/real_iwslt17 in the checkout; it must not
#   exist yet), UPDATES (2000), THREADS (2), VOCAB (8000), BEAM (4), TEST_TALKS (all, or the first N test talks),
#   SYSTEMS ("sentence concat hanoit"; add hanoit_online), CTXMT (the ctxmt command).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)   # recipes/yang2023_hanoit/ -> the checkout
[ -f "$REPO/pyproject.toml" ] || REPO=$PWD                       # a copy, or an installed package: the current folder
MARUF=${MARUF:-$REPO/../shared/data/maruf2019/IWSLT2017}
OUT=${OUT:-$REPO/runs/yang2023_hanoit/real_iwslt17}
UPDATES=${UPDATES:-2000}
THREADS=${THREADS:-2}
VOCAB=${VOCAB:-8000}
BEAM=${BEAM:-4}
TEST_TALKS=${TEST_TALKS:-all}
read -r -a SYSTEMS <<< "${SYSTEMS:-sentence concat hanoit}"
VALID_TALKS=5
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$THREADS}
if [ -z "${CTXMT:-}" ]; then
  if [ -x "$REPO/.venv/bin/ctxmt" ]; then CTXMT=$REPO/.venv/bin/ctxmt; else CTXMT=ctxmt; fi
fi

fail() { echo "real_iwslt17: $*" >&2; exit 2; }
for f in "$MARUF"/concatenated_en2de_{dev,test}_{en,de}.txt; do
  [ -f "$f" ] || fail "$f not found: set MARUF to the folder of Maruf et al.'s IWSLT2017 files (github.com/sameenmaruf/selective-attn, data/IWSLT2017)"
done
[ -e "$OUT" ] && fail "$OUT exists: remove it, or set OUT to a new folder"
command -v "$CTXMT" > /dev/null || fail "$CTXMT not found: install ctxmt (pip install -e .) or set CTXMT"

# system -> recipe and its --set overrides (the same dims for all: 2 encoder + 2 decoder layers)
declare -A RECIPE=([sentence]=sentence [concat]=concat [hanoit]=hanoit [hanoit_online]=hanoit)
HANOIT="model.encoder_layers=2 model.decoder_layers=2 model.unified_layers=1 model.selection_layers=1
  model.src_context_sentences=1 model.q=0.2"
declare -A EXTRA=([sentence]=""
  [concat]="model.src_context_sentences=1 model.tgt_context_sentences=0 model.cd=1.0 model.shift=null
    model.segment=learned train.early_stop_on=window_loss"
  [hanoit]="$HANOIT model.src_next_sentences=1"
  [hanoit_online]="$HANOIT model.src_next_sentences=0")
for sys in "${SYSTEMS[@]}"; do
  [ -n "${RECIPE[$sys]:-}" ] || fail "unknown system '$sys' in SYSTEMS: use sentence, concat, hanoit, hanoit_online"
done

mkdir -p "$OUT/raw"
# talks FILE FIRST LAST: the talks numbered FIRST..LAST (1-based) of a Maruf file, still in Maruf's format (a <d>
# line before each talk; a CRLF line end is kept as it is, the reader takes it)
talks() {
  awk -v a="$2" -v b="$3" '{ line = $0; sub(/\r$/, "", line) } line == "<d>" { d++ } d >= a && d <= b' "$1"
}
n_dev=$(tr -d '\r' < "$MARUF/concatenated_en2de_dev_en.txt" | grep -cx '<d>')
n_test=$(tr -d '\r' < "$MARUF/concatenated_en2de_test_en.txt" | grep -cx '<d>')
[ "$TEST_TALKS" = all ] && TEST_TALKS=$n_test
for lang in en de; do
  talks "$MARUF/concatenated_en2de_dev_$lang.txt" 1 $((n_dev - VALID_TALKS)) > "$OUT/raw/train_$lang.txt"
  talks "$MARUF/concatenated_en2de_dev_$lang.txt" $((n_dev - VALID_TALKS + 1)) "$n_dev" > "$OUT/raw/valid_$lang.txt"
  talks "$MARUF/concatenated_en2de_test_$lang.txt" 1 "$TEST_TALKS" > "$OUT/raw/test_$lang.txt"
done

declare -A WALL
step() {  # step NAME COMMAND...: run it, keep its output in OUT/NAME.log, record the wall time
  local name=$1 t0=$SECONDS; shift
  echo "== $name: $*"
  "$@" > "$OUT/$name.log" 2>&1 || { tail -n 20 "$OUT/$name.log" >&2; fail "$name failed (log: $OUT/$name.log)"; }
  tail -n 3 "$OUT/$name.log"
  WALL[$name]=$((SECONDS - t0))
  echo "   wall: ${WALL[$name]} s"
}

step prepare "$CTXMT" prepare maruf --train "$OUT/raw/train" --valid "$OUT/raw/valid" --test "$OUT/raw/test" \
  --src-lang en --tgt-lang de --moses --joint --spm-type bpe --vocab-size "$VOCAB" --out "$OUT/data"

COMMON=(--set "data.path=$OUT/data" --set "data.max_tokens=4096" --set "train.max_steps=$UPDATES"
        --set "train.valid_every=$(( UPDATES / 4 > 0 ? UPDATES / 4 : 1 ))" --set "train.threads=$THREADS"
        --set "decode.beam=$BEAM")
for sys in "${SYSTEMS[@]}"; do
  sets=()
  for s in ${EXTRA[$sys]}; do sets+=(--set "$s"); done
  step "train_$sys" "$CTXMT" train "quickstart/${RECIPE[$sys]}" "${COMMON[@]}" "${sets[@]}" \
    --set "train.save_dir=$OUT/$sys"
  step "evaluate_$sys" "$CTXMT" evaluate -c "$OUT/$sys/checkpoint_best.pt" --split test --tokenize none \
    --out "$OUT/bleu_$sys.json"
done

echo
echo "IWSLT-2017 En->De (Maruf et al. 2019): train = $((n_dev - VALID_TALKS)) dev talks, test = $TEST_TALKS talks," \
     "$UPDATES updates per system, beam $BEAM, $THREADS threads"
printf '%-14s %8s %8s %10s %10s\n' system BLEU chrF train_s eval_s
for sys in "${SYSTEMS[@]}"; do
  read -r bleu chrf < <(python3 -c 'import json, sys; m = next(iter(json.load(open(sys.argv[1]))["metrics"].values()))
print("%.2f %.2f" % (m["BLEU"], m["chrF"]))' "$OUT/bleu_$sys.json")
  printf '%-14s %8s %8s %10s %10s\n' "$sys" "$bleu" "$chrf" "${WALL[train_$sys]}" "${WALL[evaluate_$sys]}"
done
for sys in "${SYSTEMS[@]}"; do
  case $sys in hanoit*)
    python3 -c 'import json, sys
rows = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
last = [r for r in rows if r["kind"] == "valid"][-1]
kept, step = "  ".join(f"{k} {v:.3f}" for k, v in last.items() if k.startswith("kept_")), last["step"]
print(f"{sys.argv[2]}: kept share of the valid context tokens at step {step}: {kept}")' \
      "$OUT/$sys/metrics.jsonl" "$sys";;
  esac
done
echo "prepare: ${WALL[prepare]} s; BLEU: tokenized, case-sensitive, on Moses-tokenized hypotheses and references"
