#!/usr/bin/env bash
# The two-step Europarl En→Fr table: a sentence-level model, then every context-aware family started from it
# (train.init_from) and fine-tuned the same number of updates, against the sentence-level model continued as many
# updates on the same data (the control). As document-level systems are usually built (Lupo et al. 2022 train K1
# from K0), and as their papers compare them: at equal data, from the same start.
#
#   prepare text (the .xz files)  ->  train sentence_small (4,000 updates)
#   -> for each system: train RECIPE --init-from the sentence model, FT_UPDATES updates, lr FT_LR (the rate the
#      first step ended at), FT_WARMUP warm-up updates, the checkpoint best on the current sentence's validation loss
#   -> translate the 14 test debates (documents; each system decodes as its recipe says), BLEU / chrF / doc-BLEU with a paired bootstrap 95% interval
#      against the control (ctxmt evaluate --significance bootstrap), SCAT's test set per pronoun, balanced and
#      with its context gain (McNemar's p), pronoun P-CXMI on the test debates (ctxmt cxmi --tokens)
#   -> the concat systems decoded again in prefix mode, whole documents and in pieces with a lead-in (time, BLEU
#      against their generate mode)
#   -> OUT/table.md (and OUT/table.json): every figure of README's Europarl table.
#
# Every step writes into OUT and is skipped when its output is already there, so the table can be built over
# several sittings (a killed training resumes with --resume; a finished one is continued when its number of updates
# is raised). Each step's wall time goes to OUT/times.tsv; a step
# stopped by hand for a while (SIGSTOP, e.g. while a test suite runs) gets a line "NAME SECONDS WHY" in
# OUT/pauses.tsv, which the table subtracts.
# Measured on 2 CPU cores (x86-64, 2 threads; the last full run, 2026-12-06/07, about 6.6 hours; README has its table):
#   prepare 32 s; sentence_small 4,000 updates 87 min; each fine-tune of 1,500 updates 27-41 min (concat s4to4 the
#   longest); translation of the test debates 2-4 min per system, concat in generate mode 16-24 min; SCAT 10-24 s;
#   P-CXMI 1-2 min (MBE 15 min); BLEU with the bootstrap about 1.5 min; each concat
#   system's prefix-mode decodings 8 min (whole documents) and 3.5-5.3 min (pieces with a lead-in).
#   (The table's own times are in OUT/times.tsv.)
#
# Usage (from anywhere; the checkout is the one holding this script, in recipes/europarl_enfr/):
#   bash recipes/europarl_enfr/two_step.sh                     # the full table
#   SENTENCE_UPDATES=20 FT_UPDATES=10 TEST_DOCS=1 SCAT_ITEMS=all SYSTEMS="concat_s2to2_cd" \
#     OUT=/tmp/smoke bash recipes/europarl_enfr/two_step.sh   # a smoke run
# Settings (environment): EUROPARL (default ../shared/data/europarl_enfr beside the checkout), SCAT (default
#   ../shared/data/scat), OUT (default runs/europarl_enfr/two_step in the checkout), SENTENCE_UPDATES (4000),
#   FT_UPDATES (1500), FT_LR (0.0005), FT_WARMUP (150), SENTENCE_WARMUP (the first step's warm-up updates; default
#   the recipe's), SIZE (small, or base: the *_base recipes, for a GPU), BEAM (4), TEST_DOCS (all, or the first N
#   test debates),
#   SYSTEMS (the fine-tuned systems, default all below), LEAD (3: the lead-in of the concat systems' pieces decoding),
#   CTXMT (the ctxmt command).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
[ -f "$REPO/pyproject.toml" ] || REPO=$PWD
HERE=$REPO/recipes/europarl_enfr
[ -d "$HERE" ] || HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
EUROPARL=${EUROPARL:-$REPO/../shared/data/europarl_enfr}
SCAT=${SCAT:-$REPO/../shared/data/scat}
OUT=${OUT:-$REPO/runs/europarl_enfr/two_step}
SENTENCE_UPDATES=${SENTENCE_UPDATES:-4000}
FT_UPDATES=${FT_UPDATES:-1500}
FT_LR=${FT_LR:-0.0005}
FT_WARMUP=${FT_WARMUP:-150}
SENTENCE_WARMUP=${SENTENCE_WARMUP:-}
SIZE=${SIZE:-small}
BEAM=${BEAM:-4}
TEST_DOCS=${TEST_DOCS:-all}
LEAD=${LEAD:-3}
read -r -a SYSTEMS <<< "${SYSTEMS:-sentence_control concat_s2to2_cd concat_s4to4_shift_cd caching_grouping_c2 mbe_enc hanoit_offline}"
if [ -z "${CTXMT:-}" ]; then
  if [ -x "$REPO/.venv/bin/ctxmt" ]; then CTXMT=$REPO/.venv/bin/ctxmt; else CTXMT=ctxmt; fi
fi
PYTHON=$(dirname "$(command -v "$CTXMT")")/python
[ -x "$PYTHON" ] || PYTHON=python3

fail() { echo "two_step: $*" >&2; exit 2; }
for f in "$EUROPARL"/{train.en.xz,train.fr.xz,train.docids.xz,valid.en,test.en,test.fr,test.docids}; do
  [ -f "$f" ] || fail "$f not found: set EUROPARL to the folder of the Europarl En-Fr files (see its README)"
done
[ -d "$SCAT" ] || fail "$SCAT not found: set SCAT to the SCAT folder (see ../shared/data/README.md)"
command -v "$CTXMT" > /dev/null || fail "$CTXMT not found: install ctxmt (pip install -e .) or set CTXMT"
[[ $SIZE == small || $SIZE == base ]] || fail "SIZE=$SIZE: choose small or base"
mkdir -p "$OUT"
DATA=$OUT/data

timed() {  # timed NAME COMMAND...: run, append "NAME seconds" to times.tsv
  local name=$1 t0=$SECONDS; shift
  echo "== $name ($(date -u +%T))"
  "$@"
  printf '%s\t%d\n' "$name" $((SECONDS - t0)) >> "$OUT/times.tsv"
}

# ---- data and the first step --------------------------------------------------------------------------------
[ -f "$DATA/meta.json" ] || timed prepare "$CTXMT" prepare text --train "$EUROPARL/train" --valid "$EUROPARL/valid" \
  --test "$EUROPARL/test" --src-lang en --tgt-lang fr --spm-type bpe --vocab-size 8000 --max-words 80 \
  --max-length-ratio 9 --out "$DATA"

train_run() {  # train_run NAME RECIPE UPDATES [ARGS...]: train (or resume) into OUT/NAME
  local name=$1 recipe=$2 updates=$3; shift 3
  local save=$OUT/$name resume=()
  # done holds the updates the step was trained to; a larger number now continues it (the inverse square-root
  # schedule does not depend on max_steps, so 2,000 updates continued to 4,000 are 4,000 updates); data.path
  # follows OUT, which may have moved between sittings
  [ -f "$save/done" ] && [ "$(cat "$save/done")" = "$updates" ] && return 0
  [ -f "$save/checkpoint_last.pt" ] && resume=(--resume --allow-changed train.max_steps,data.path)
  timed "train_$name" "$CTXMT" train "$HERE/$recipe.yaml" "${resume[@]}" --log-format plain \
    --set "data.path=$DATA" --set "train.save_dir=$save" --set "train.max_steps=$updates" "$@"
  echo "$updates" > "$save/done"
}

first=()
[ -z "$SENTENCE_WARMUP" ] || first=(--set "train.warmup_steps=$SENTENCE_WARMUP")
train_run sentence "sentence_$SIZE" "$SENTENCE_UPDATES" "${first[@]}"
SENTENCE=$OUT/sentence/checkpoint_best.pt

# ---- the second step: every system from the sentence-level model ----------------------------------------------
declare -A RECIPE=([sentence_control]=sentence_$SIZE [concat_s2to2_cd]=concat_s2to2_cd_$SIZE
  [concat_s4to4_shift_cd]=concat_s4to4_shift_cd_$SIZE [caching_grouping_c2]=caching_grouping_c2_$SIZE
  [mbe_enc]=mbe_enc_$SIZE [hanoit_offline]=hanoit_offline_$SIZE)
FT_VALID=$(( FT_UPDATES / 6 > 0 ? FT_UPDATES / 6 : 1 ))
for system in "${SYSTEMS[@]}"; do
  [ -n "${RECIPE[$system]:-}" ] || fail "unknown system $system (choose from ${!RECIPE[*]})"
  train_run "$system" "${RECIPE[$system]}" "$FT_UPDATES" --init-from "$SENTENCE" --set "train.lr=$FT_LR" \
    --set "train.warmup_steps=$FT_WARMUP" --set "train.valid_every=$FT_VALID" --set "train.average_last=0"
done

# ---- the test debates as documents (blank line between debates) ---------------------------------------------------
TEST=$OUT/test
if [ ! -f "$TEST/src.txt" ]; then
  mkdir -p "$TEST"
  "$PYTHON" - "$EUROPARL" "$TEST" "$TEST_DOCS" <<'EOF'
import sys
from pathlib import Path
root, out, keep = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
src, ref, ids = ((root / f"test.{n}").read_text(encoding="utf-8").splitlines() for n in ("en", "fr", "docids"))
order = list(dict.fromkeys(ids))
chosen = set(order if keep == "all" else order[: int(keep)])
rows = [(s, r, d) for s, r, d in zip(src, ref, ids) if d in chosen]
lines, previous = [], None
for s, _, d in rows:
    if previous is not None and d != previous:
        lines.append("")
    lines.append(s)
    previous = d
(out / "src.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
(out / "ref.txt").write_text("".join(r + "\n" for _, r, _ in rows), encoding="utf-8")
(out / "docids.txt").write_text("".join(d + "\n" for *_, d in rows), encoding="utf-8")
EOF
fi

ALL=(sentence "${SYSTEMS[@]}")
for system in "${ALL[@]}"; do
  ckpt=$OUT/$system/checkpoint_best.pt
  eval_dir=$OUT/eval/$system
  mkdir -p "$eval_dir"
  hyp=$OUT/eval/hyp/$system.txt           # named by the system: evaluate reports each file by its name
  if [ ! -f "$hyp" ]; then
    mkdir -p "$OUT/eval/hyp"
    rm -f "$eval_dir/doc_hyp.txt"         # a translation killed half-way: translate replaces no file unasked
    # each system decodes as its recipe says (concat: target_mode generate, as Lupo et al.; the closing JSON line
    # says how many generated windows fell back to prefix mode, which the table reports)
    timed "translate_$system" "$CTXMT" translate "$TEST/src.txt" -c "$ckpt" --beam "$BEAM" -o "$eval_dir/doc_hyp.txt" \
      --log-format json 2> >(tee "$eval_dir/translate.log" >&2)
    # one hypothesis per source sentence: the blank lines between debates dropped, in step with the source
    paste -d '\t' "$TEST/src.txt" "$eval_dir/doc_hyp.txt" | awk -F '\t' '$1 != "" {print $2}' > "$hyp.partial"
    mv "$hyp.partial" "$hyp"
  fi
  [ -f "$eval_dir/scat/results.json" ] || rm -rf "$eval_dir/scat"
  [ -f "$eval_dir/scat/results.json" ] || timed "scat_$system" "$CTXMT" contrastive scat --data "$SCAT" \
    --split test -c "$ckpt" --out "$eval_dir/scat"
  [ -f "$eval_dir/cxmi.json" ] || timed "cxmi_$system" "$CTXMT" cxmi -c "$ckpt" --data "$DATA" --split test \
    --tokens il,elle,ils,elles --out "$eval_dir/cxmi.json"
done

# BLEU / chrF / doc-BLEU of every system, bootstrap intervals and p against the control
CONTROL=sentence_control
[[ " ${SYSTEMS[*]} " == *" $CONTROL "* ]] || CONTROL=sentence
hyps=(--hyp "$OUT/eval/hyp/$CONTROL.txt")
for system in "${ALL[@]}"; do
  [ "$system" = "$CONTROL" ] || hyps+=(--hyp "$OUT/eval/hyp/$system.txt")
done
rm -f "$OUT/eval/bleu.json"
timed bleu "$CTXMT" evaluate "${hyps[@]}" --ref "$TEST/ref.txt" --docids "$TEST/docids.txt" --document-level \
  --significance bootstrap --out "$OUT/eval/bleu.json" > "$OUT/eval/bleu.txt"

# ---- concatenation's decoding: generate mode (the recipes', above) against prefix mode, whole documents and in
# pieces with a lead-in of LEAD sentences (translate --warmup-sentences): time and BLEU on the same test debates
DECODED=()
for system in "${SYSTEMS[@]}"; do
  [[ $system == concat_* ]] || continue
  for mode in prefix lead; do
    name=$system.$mode
    hyp=$OUT/eval/decoding/$name.txt
    DECODED+=("$name")
    [ -f "$hyp" ] && continue
    mkdir -p "$OUT/eval/decoding"
    rm -f "$OUT/eval/decoding/$name.doc.txt"
    extra=(--target-mode prefix)
    [ "$mode" = lead ] && extra+=(--warmup-sentences "$LEAD")
    timed "translate_$name" "$CTXMT" translate "$TEST/src.txt" -c "$OUT/$system/checkpoint_best.pt" --beam "$BEAM" \
      "${extra[@]}" -o "$OUT/eval/decoding/$name.doc.txt" --log-format json \
      2> >(tee "$OUT/eval/decoding/$name.log" >&2)
    paste -d '\t' "$TEST/src.txt" "$OUT/eval/decoding/$name.doc.txt" | awk -F '\t' '$1 != "" {print $2}' > "$hyp.partial"
    mv "$hyp.partial" "$hyp"
  done
  rm -f "$OUT/eval/decoding/$system.json"
  "$CTXMT" evaluate --hyp "$OUT/eval/hyp/$system.txt" --hyp "$OUT/eval/decoding/$system.prefix.txt" \
    --hyp "$OUT/eval/decoding/$system.lead.txt" --ref "$TEST/ref.txt" --significance bootstrap \
    --out "$OUT/eval/decoding/$system.json" > /dev/null
done

"$PYTHON" "$HERE/two_step_table.py" "$OUT" --control "$CONTROL" --systems "${ALL[@]}" --decoded "${DECODED[@]}"
echo "two_step: the table is in $OUT/table.md"
