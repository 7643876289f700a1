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
targets=(load_pte structured saved_json mutate_real load_xnnpack load_ptd runner_lines)
# Every target in fuzz/fuzz_targets/ must be listed above, so none is silently left unfuzzed.
for f in fuzz/fuzz_targets/*.rs; do
  name="$(basename "$f" .rs)"
  case " ${targets[*]} " in
    *" $name "*) ;;
    *) echo "error: fuzz target $name is not in the target list of $0" >&2; exit 1 ;;
  esac
done
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
case "$SANITIZER" in
  none)
    cargo fuzz build -O --sanitizer none ;;
  coverage)
    # ClusterFuzzLite's coverage build (`sanitizer: coverage`): the base image's cargo wrapper
    # (/usr/local/bin/cargo) turns `cargo fuzz build` into a `cargo build --bins` of fuzz/ with
    # the -Cinstrument-coverage RUSTFLAGS set by `compile`, and copies the binaries into
    # fuzz/target/x86_64-unknown-linux-gnu/release. cargo-fuzz itself has no `coverage`
    # sanitizer, so outside that image use `cargo fuzz coverage TARGET` instead.
    if [ ! -x /usr/local/bin/cargo ] || [[ "${RUSTFLAGS:-}" != *instrument-coverage* ]]; then
      echo "error: SANITIZER=coverage needs the OSS-Fuzz base-builder-rust image; by hand use 'cargo fuzz coverage TARGET'" >&2
      exit 1
    fi
    cargo fuzz build -O ;;
  *)
    RUSTC_BOOTSTRAP="${RUSTC_BOOTSTRAP:-1}" cargo fuzz build -O --sanitizer "$SANITIZER" ;;
esac
# cargo fuzz builds for an explicit --target, so the binaries are in fuzz/target/<triple>/release.
bin_dirs=(fuzz/target/*/release)
bin_dir="${bin_dirs[0]}"
for target in "${targets[@]}"; do
  cp "$bin_dir/$target" "$OUT/$target"
  # A target's own dictionary when it has one (runner_lines: JSON tokens), else the .pte one.
  dict="fuzz/$target.dict"
  [ -f "$dict" ] || dict=fuzz/pte.dict
  cp "$dict" "$OUT/$target.dict"
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
echo "fuzz targets in $OUT: ${targets[*]}"
