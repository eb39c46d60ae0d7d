#!/usr/bin/env bash
# Why do trained HanoiT models keep so little context? Yang et al.'s Figure 4 (NC-2016, 1 previous + 1 next
# sentence) shows 60% of the context tokens kept after the first selection layer and 48% after the last; ctxmt's
# trained models keep a few per cent. This script trains the same HanoiT under each open reading of the
# selection (eqs. 5-7) and prints, for each, the kept share of the validation context after every selection layer
# at every validation (through training), the test BLEU of its best checkpoint, and the rule's control: the share
# of the current sentence's own tokens the same rule would keep (`ctxmt analyze-attention`'s current_control).
#
# Readings (CHOICES, each a name below; the options they set are in the recipe reference, docs/reference/recipes.md):
#   text       eq. 6 counts over the current sentence's tokens, as the text says; </s> among them (the default)
#   no_eos     the same without the current sentence's </s> (selection_eos: false)
#   printed    eq. 6 over the context tokens, the range the equation prints (selection_queries: context)
#   printed_no_eos   both of the above
#   q0.1 q0.3 q0.5   the default reading at another threshold q (the paper's Figure 5 range; the recipes' q is 0.2)
#   measure    the default reading measured only (selection_drops: false): each selection layer logs the share its
#              rule would keep of *all* context tokens and drops none (not the paper's model: a diagnostic that
#              separates the criterion from the feedback of the hard selection; its shares are not compounded)
#
# Data (DATA):
#   synthetic  the synthetic benchmark (`ctxmt prepare synthetic`, seed 1), the packaged recipe quickstart/hanoit
#              (d 128, 1 unified + 5 selection layers) with the paper's window (1 previous + 1 next sentence)
#   europarl   Europarl En->Fr prepared as recipes/europarl_enfr/ says (data/europarl_enfr_8k, or EUROPARL=DIR),
#              the recipe europarl_enfr/hanoit_offline_small (d 256, 1 + 2 layers, 1 previous + 1 next)
#
# Usage (from anywhere; the checkout is the one holding this script):
#   bash recipes/yang2023_hanoit/kept_context.sh                                # synthetic, every reading, 1000 updates
#   DATA=europarl UPDATES=1000 CHOICES="text no_eos printed" bash recipes/yang2023_hanoit/kept_context.sh
#   UPDATES=20 CHOICES="text printed" BEAM=1 bash recipes/yang2023_hanoit/kept_context.sh     # a smoke run
# Settings (environment): DATA (synthetic), CHOICES (all readings above), UPDATES (synthetic 1000, europarl 4000),
#   VALID_EVERY (UPDATES / 4), THREADS (2), BEAM (4), OUT (work folder, default runs/yang2023_hanoit/kept_context_DATA;
#   it must not exist yet), EUROPARL (the prepared Europarl folder), CTXMT (the ctxmt command).
# A run of the synthetic default takes about 5 minutes per reading on 2 CPU cores.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)   # recipes/yang2023_hanoit/ -> the checkout
[ -f "$REPO/pyproject.toml" ] || REPO=$PWD                       # a copy, or an installed package: the current folder
DATA=${DATA:-synthetic}
read -r -a CHOICES <<< "${CHOICES:-text no_eos printed printed_no_eos q0.1 q0.3 q0.5 measure}"
THREADS=${THREADS:-2}
BEAM=${BEAM:-4}
OUT=${OUT:-$REPO/runs/yang2023_hanoit/kept_context_$DATA}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$THREADS}
if [ -z "${CTXMT:-}" ]; then
  if [ -x "$REPO/.venv/bin/ctxmt" ]; then CTXMT=$REPO/.venv/bin/ctxmt; else CTXMT=ctxmt; fi
fi

fail() { echo "kept_context: $*" >&2; exit 2; }
[ -e "$OUT" ] && fail "$OUT exists: remove it, or set OUT to a new folder"
command -v "$CTXMT" > /dev/null || fail "$CTXMT not found: install ctxmt (pip install -e .) or set CTXMT"

declare -A READING=([text]="" [no_eos]="model.selection_eos=false" [printed]="model.selection_queries=context"
  [printed_no_eos]="model.selection_queries=context model.selection_eos=false"
  [q0.1]="model.q=0.1" [q0.3]="model.q=0.3" [q0.5]="model.q=0.5" [measure]="model.selection_drops=false")
for choice in "${CHOICES[@]}"; do
  [ -n "${READING[$choice]+set}" ] || fail "unknown reading '$choice' in CHOICES: use ${!READING[*]}"
done
case $DATA in
  synthetic) ;;
  europarl)
    EUROPARL=${EUROPARL:-$REPO/data/europarl_enfr_8k}
    [ -f "$EUROPARL/meta.json" ] || fail "$EUROPARL is not a prepared dataset: prepare it as recipes/europarl_enfr/ says, or set EUROPARL";;
  *) fail "unknown DATA '$DATA': use synthetic or europarl";;
esac

mkdir -p "$OUT"
case $DATA in
  synthetic)
    UPDATES=${UPDATES:-1000}
    RECIPE=quickstart/hanoit
    "$CTXMT" prepare synthetic --out "$OUT/data" --seed 1 > "$OUT/prepare.log" 2>&1 \
      || { tail -n 5 "$OUT/prepare.log" >&2; fail "prepare failed (log: $OUT/prepare.log)"; }
    BASE=(--set "data.path=$OUT/data" --set model.src_context_sentences=1 --set model.src_next_sentences=1);;
  europarl)
    UPDATES=${UPDATES:-4000}
    RECIPE=europarl_enfr/hanoit_offline_small
    BASE=(--set "data.path=$EUROPARL");;
esac
VALID_EVERY=${VALID_EVERY:-$(( UPDATES / 4 > 0 ? UPDATES / 4 : 1 ))}
BASE+=(--set "train.max_steps=$UPDATES" --set "train.valid_every=$VALID_EVERY" --set "train.threads=$THREADS"
       --set "decode.beam=$BEAM")

declare -A WALL
for choice in "${CHOICES[@]}"; do
  sets=()
  for s in ${READING[$choice]}; do sets+=(--set "$s"); done
  echo "== $choice: ${READING[$choice]:-as the recipe}"
  t0=$SECONDS
  "$CTXMT" train "$RECIPE" "${BASE[@]}" "${sets[@]}" --set "train.save_dir=$OUT/$choice" --log-format plain \
    > "$OUT/train_$choice.log" 2>&1 || { tail -n 20 "$OUT/train_$choice.log" >&2; fail "training $choice failed"; }
  WALL[$choice]=$((SECONDS - t0))
  "$CTXMT" evaluate -c "$OUT/$choice/checkpoint_best.pt" --split test --out "$OUT/bleu_$choice.json" \
    > "$OUT/evaluate_$choice.log" 2>&1 || { tail -n 20 "$OUT/evaluate_$choice.log" >&2; fail "evaluating $choice failed"; }
  # the rule's control: the same rule on the current sentence's own tokens, over 400 validation windows
  "$CTXMT" analyze-attention -c "$OUT/$choice/checkpoint_best.pt" --split valid --max-sentences 400 --no-plots \
    --out "$OUT/analysis_$choice" > "$OUT/analysis_$choice.log" 2>&1 \
    || { tail -n 20 "$OUT/analysis_$choice.log" >&2; fail "analysing $choice failed"; }
  echo "   trained in ${WALL[$choice]} s"
done

echo
echo "HanoiT's kept share of the validation context tokens after each selection layer (%), $DATA, $UPDATES updates"
python3 - "$OUT" "${CHOICES[@]}" <<'EOF'
import json, re, sys
from pathlib import Path

out, choices = Path(sys.argv[1]), sys.argv[2:]
for choice in choices:
    rows = [json.loads(line) for line in (out / choice / "metrics.jsonl").open() if line.strip()]
    valid = [r for r in rows if r["kind"] == "valid"]
    bleu = next(iter(json.loads((out / f"bleu_{choice}.json").read_text())["metrics"].values()))["BLEU"]
    layers = sorted((k for k in valid[-1] if re.fullmatch(r"kept_context_layer\d+", k)), key=lambda k: int(k[18:]))
    print(f"\n{choice}: test BLEU {bleu:.2f} (best checkpoint); layers " + " / ".join(k[18:] for k in layers))
    for r in valid:
        print(f"  step {r['step']:>6}: " + " / ".join(f"{100 * r[k]:.1f}" for k in layers)
              + f"   (current loss {r['current_loss']:.3f})")
    control = json.loads((out / f"analysis_{choice}" / "analysis.json").read_text())["kept_context"]["source"]
    print("  the same rule on the current sentence's own tokens (best checkpoint, 400 validation windows): "
          + " / ".join(f"{100 * c:.1f}" for c in control["current_control"]))
EOF
