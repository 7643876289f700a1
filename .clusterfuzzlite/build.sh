#!/bin/bash -eu
# Builds every fuzz target of ptecheck into $OUT with its seed corpus and dictionary.
# In ClusterFuzzLite / OSS-Fuzz: $SRC, $OUT and $SANITIZER come from the base image.
# By hand (no Docker): `.clusterfuzzlite/build.sh` builds into fuzz/out with no sanitizer
# (SANITIZER=address RUSTC_BOOTSTRAP=1 .clusterfuzzlite/build.sh for AddressSanitizer).
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -n "${SRC:-}" ] && [ -d "$SRC/ptecheck" ]; then here="$SRC/ptecheck"; fi
OUT="${OUT:-$here/fuzz/out}"
SANITIZER="${SANITIZER:-none}"
mkdir -p "$OUT"
cd "$here"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
if [ "$SANITIZER" = "none" ]; then
  cargo fuzz build -O --sanitizer none
else
  RUSTC_BOOTSTRAP="${RUSTC_BOOTSTRAP:-1}" cargo fuzz build -O --sanitizer "$SANITIZER"
fi
bin_dir="$(ls -d fuzz/target/*/release | head -n 1)"
for target in load_pte structured saved_json mutate_real; do
  cp "$bin_dir/$target" "$OUT/$target"
  cp fuzz/pte.dict "$OUT/$target.dict"
  # Seed corpus: every committed input of the target (seeds, edge cases, regressions, crashes).
  python3 - "$here/corpus/$target" "$OUT/${target}_seed_corpus.zip" <<'PY'
import os, sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as z:
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if f != "README.md":
                p = os.path.join(root, f)
                z.write(p, os.path.relpath(p, src).replace(os.sep, "_"))
PY
done
echo "fuzz targets in $OUT: $(ls "$OUT" | tr '\n' ' ')"
