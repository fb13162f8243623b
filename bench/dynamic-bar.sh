#!/bin/bash
# Issue #28's bar (docs/dynamic-shapes.md): a dynamic bundle against the
# static one at the same dims on the emulator (f32, sm_80): warp
# instructions and global bytes summed over the profile's kernels, and
# whether the outputs are byte-identical. Usage (from the repository root,
# after `cargo build --bins`): bench/dynamic-bar.sh [WORKDIR]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
E=${EINTUP:-$ROOT/target/debug/eintup}
PY=${PYTHON:-$ROOT/.venv/bin/python}
W=${1:-$(mktemp -d)}
mkdir -p "$W" && cd "$W"
"$PY" - <<'PY'
import numpy as np
r = np.random.default_rng(1)
f = lambda *s: r.random(s, dtype=np.float32)
np.save('a.npy', f(256, 256)); np.save('b.npy', f(256, 256))
np.save('x.npy', f(2, 10, 10, 4)); np.save('w.npy', f(3, 3, 4, 5))
np.save('s.npy', f(512, 1024))
np.save('src.npy', f(9, 9, 5)); np.save('idx.npy', r.integers(0, 9, (40, 2), dtype=np.int32))
PY
# case, example, dynamic flags, static binds, inputs, output
cases=(
  "matmul|docs/examples/matmul.et|--rank batch=0|--bind batch=[] --bind row=[256] --bind k=[256] --bind col=[256]|a=a.npy b=b.npy|c"
  "conv|bench/ops/conv2d.et|--rank ipos=2 --bind stride=[1,1]|--bind batch=[2] --bind ipos=[10,10] --bind fpos=[3,3] --bind stride=[1,1] --bind ichan=[4] --bind ochan=[5]|x=x.npy w=w.npy|y"
  "reduce_sum|docs/examples/reduce_sum.et|--rank keep=1|--bind keep=[512] --bind drop=[1024]|FIRST=s.npy|OUT"
  "gather_nd|docs/examples/gather_nd.et|--rank batch=0 --rank loc=2 --rank w=1 --rank item=1|--bind batch=[] --bind loc=[9,9] --bind w=[40] --bind item=[5]|src=src.npy idx=idx.npy|dst"
)
printf "%-11s %-22s %-22s %-9s %-24s %-7s %s\n" case "kernels dyn" "kernels static" "instr x" "bytes dyn / static" "bytes x" identical
for c in "${cases[@]}"; do
  IFS='|' read -r name file dyn st inputs out <<< "$c"
  # shellcheck disable=SC2086
  "$E" build "$ROOT/$file" --dynamic $dyn --float f32 -o "$name-dyn.etb" > /dev/null 2>&1
  # shellcheck disable=SC2086
  "$E" build "$ROOT/$file" $st --float f32 -o "$name-st.etb" > /dev/null 2>&1
  # reduce_sum: the first input and the output by the manifest's names
  first=$("$PY" -c "import json; print([b['name'] for b in json.load(open('$name-st.etb/manifest.json'))['buffers'] if b['role']=='input'][0])")
  [ "$out" = OUT ] && out=$("$PY" -c "import json; print([b['name'] for b in json.load(open('$name-st.etb/manifest.json'))['buffers'] if b['role']=='output'][0])")
  args=()
  for i in ${inputs//FIRST/$first}; do args+=(--input "$i"); done
  for b in dyn st; do "$E" exec "$name-$b.etb" --device emu "${args[@]}" --profile-json "$name-$b.json" --out "$name-$b-out" > /dev/null; done
  "$PY" - "$name" "$out" <<'PY'
import json, sys, filecmp
name, out = sys.argv[1], sys.argv[2]
def total(b):
    ks = json.load(open(f'{name}-{b}.json'))['kernels']
    return [k['name'] for k in ks], sum(k['warp_instructions'] for k in ks), sum(k['global_bytes'] for k in ks)
(kd, id_, bd), (ks, is_, bs) = total('dyn'), total('st')
same = filecmp.cmp(f'{name}-dyn-out/{out}.npy', f'{name}-st-out/{out}.npy', shallow=False)
print(f"{name:<11} {' '.join(kd):<22} {' '.join(ks):<22} {id_/is_:<9.3f} {f'{bd} / {bs}':<24} {bd/bs:<7.3f} {same}")
PY
done
