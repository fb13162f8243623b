//! End to end: every program of docs/examples through sema and the
//! interpreter, on several configurations, against straightforward Rust
//! reference code written per operation here. Inputs (RANDOM arrays) are
//! taken from the interpreter's result; outputs are recomputed
//! independently.

use eintup::driver::Source;
use eintup::interp::{run, RunOptions};
use eintup::ir::et::Module;
use eintup::tensor::Tensor;
use eintup_testkit::{assert_close, Tol};
use std::collections::HashMap;

/// The interpreter against independent formulas (summation orders differ).
const TOL: Tol = Tol { rel: 1e-9, abs: 1e-9 };

struct Run {
    arrays: HashMap<String, Tensor>,
    dims: HashMap<String, Vec<usize>>,
}

impl Run {
    fn a(&self, n: &str) -> (Vec<usize>, Vec<f64>) {
        let t = &self.arrays[n];
        (t.shape.clone(), t.to_f64_vec())
    }
    fn d(&self, n: &str) -> Vec<usize> {
        self.dims[n].clone()
    }
}

fn exec(example: &str, binds: &[&str], seed: u64) -> Run {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples").join(example);
    let src = Source::load(&path).unwrap();
    let binds: Vec<String> = binds.iter().map(|s| s.to_string()).collect();
    let (m, cfg): (Module, _) = eintup::pipeline::specialized_module(&src, &binds, seed).unwrap_or_else(|f| panic!("{example} {binds:?}: {f}"));
    let out = run(&m, &RunOptions { seed, ..RunOptions::default() }).unwrap_or_else(|e| panic!("{e:?}"));
    let arrays = m.arrays.iter().map(|a| a.name.clone()).zip(out).collect();
    let dims = cfg.dims.iter().map(|(n, d)| (n.clone(), d.iter().map(|&x| x as usize).collect())).collect();
    Run { arrays, dims }
}

fn prod(s: &[usize]) -> usize {
    s.iter().product()
}

/// Row-major multi-index of `flat` in `shape`.
fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut v = vec![0; shape.len()];
    for i in (0..shape.len()).rev() {
        v[i] = flat % shape[i];
        flat /= shape[i];
    }
    v
}

fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&i, &d)| acc * d + i)
}

fn cat(parts: &[&[usize]]) -> Vec<usize> {
    parts.iter().flat_map(|p| p.iter().copied()).collect()
}

#[test]
fn matmul() {
    for binds in
        [&["batch=[2]", "row=[3]", "k=[4]", "col=[5]"][..], &["batch=[]", "row=[1]", "k=[7]", "col=[2]"], &["batch=[2,1,2]", "row=[2]", "k=[1]", "col=[3]"]]
    {
        let r = exec("matmul.et", binds, 3);
        let (b, row, k, col) = (r.d("batch"), r.d("row")[0], r.d("k")[0], r.d("col")[0]);
        let (_, a) = r.a("a");
        let (_, bb) = r.a("b");
        let nb = prod(&b);
        let mut want = vec![0.0; nb * row * col];
        for n in 0..nb {
            for i in 0..row {
                for j in 0..col {
                    want[(n * row + i) * col + j] = (0..k).map(|t| a[(n * row + i) * k + t] * bb[(n * k + t) * col + j]).sum();
                }
            }
        }
        let (shape, c) = r.a("c");
        assert_eq!(shape, cat(&[&b, &[row, col]]));
        assert_close("matmul", &c, &want, TOL);
    }
}

/// y[b, o, oc] = sum_{f, ic} w[f, ic, oc] * x[b, o*s + f - pad, ic].
fn conv_ref(x: &[f64], xs: &[usize], w: &[f64], fpos: &[usize], stride: &[usize], pad: &[usize], opos: &[usize], ochan: usize) -> Vec<f64> {
    let (batch, ichan) = (xs[0], xs[xs.len() - 1]);
    let ipos = &xs[1..xs.len() - 1];
    let mut y = vec![0.0; batch * prod(opos) * ochan];
    for b in 0..batch {
        for o in 0..prod(opos) {
            let oi = unravel(o, opos);
            for f in 0..prod(fpos) {
                let fi = unravel(f, fpos);
                let mut pi = Vec::new();
                for d in 0..oi.len() {
                    let p = (oi[d] * stride[d] + fi[d]) as i64 - pad[d] as i64;
                    if p < 0 || p >= ipos[d] as i64 {
                        break;
                    }
                    pi.push(p as usize);
                }
                if pi.len() != oi.len() {
                    continue;
                }
                let p = ravel(&pi, ipos);
                for oc in 0..ochan {
                    for ic in 0..ichan {
                        y[(b * prod(opos) + o) * ochan + oc] += w[(f * ichan + ic) * ochan + oc] * x[(b * prod(ipos) + p) * ichan + ic];
                    }
                }
            }
        }
    }
    y
}

#[test]
fn conv_valid_both_forms() {
    for file in ["conv_valid.et", "conv_valid_alt.et"] {
        for binds in [
            &["ipos=[9]", "fpos=[3]", "stride=[2]", "batch=[2]", "ichan=[2]", "ochan=[3]"][..],
            &["ipos=[9,8]", "fpos=[3,2]", "stride=[2,1]"],
            &["ipos=[8,9,10]", "fpos=[2,3,4]", "stride=[3,1,2]", "ichan=[1]"],
        ] {
            let r = exec(file, binds, 1);
            let (xs, x) = r.a("x");
            let (_, w) = r.a("w");
            let (fpos, stride, opos) = (r.d("fpos"), r.d("stride"), r.d("opos"));
            // VALID: opos = ceil((ipos - fpos + 1) / stride).
            for d in 0..fpos.len() {
                assert_eq!(opos[d], (xs[1 + d] - fpos[d] + 1).div_ceil(stride[d]));
            }
            let want = conv_ref(&x, &xs, &w, &fpos, &stride, &vec![0; fpos.len()], &opos, r.d("ochan")[0]);
            assert_close(file, &r.a("y").1, &want, TOL);
        }
    }
}

#[test]
fn conv_same() {
    for binds in [&["ipos=[7]", "fpos=[3]", "stride=[1]"][..], &["ipos=[6,8]", "fpos=[4,5]", "ichan=[2]", "ochan=[2]"]] {
        let r = exec("conv_same.et", binds, 2);
        let (xs, x) = r.a("x");
        let (_, w) = r.a("w");
        let fpos = r.d("fpos");
        let pad: Vec<usize> = fpos.iter().map(|f| (f - 1) / 2).collect();
        let want = conv_ref(&x, &xs, &w, &fpos, &r.d("stride"), &pad, &r.d("opos"), r.d("ochan")[0]);
        assert_close("conv_same", &r.a("y").1, &want, TOL);
    }
}

#[test]
fn conv_transpose() {
    for binds in [&["ipos=[4]", "fpos=[3]", "stride=[2]"][..], &["ipos=[5,4]", "fpos=[2,3]", "stride=[3,1]", "ichan=[2]", "ochan=[2]"]] {
        let r = exec("conv_transpose.et", binds, 4);
        let (xs, x) = r.a("x");
        let (_, w) = r.a("w");
        let (fpos, stride, opos) = (r.d("fpos"), r.d("stride"), r.d("opos"));
        let (batch, ichan, ochan) = (xs[0], xs[xs.len() - 1], r.d("ochan")[0]);
        let ipos = &xs[1..xs.len() - 1];
        // Scatter: y[b, i*s + f, oc] += w[f, oc, ic] * x[b, i, ic].
        let mut want = vec![0.0; batch * prod(&opos) * ochan];
        for b in 0..batch {
            for i in 0..prod(ipos) {
                let ii = unravel(i, ipos);
                for f in 0..prod(&fpos) {
                    let fi = unravel(f, &fpos);
                    let oi: Vec<usize> = (0..ii.len()).map(|d| ii[d] * stride[d] + fi[d]).collect();
                    let o = ravel(&oi, &opos);
                    for oc in 0..ochan {
                        for ic in 0..ichan {
                            want[(b * prod(&opos) + o) * ochan + oc] += w[(f * ochan + oc) * ichan + ic] * x[(b * prod(ipos) + i) * ichan + ic];
                        }
                    }
                }
            }
        }
        assert_close("conv_transpose", &r.a("y").1, &want, TOL);
    }
}

#[test]
fn gather_nd() {
    for binds in [
        &["batch=[2]", "loc=[3,4]", "w=[5]", "item=[2]"][..],
        &["batch=[]", "loc=[6]", "w=[2,3]", "item=[]"],
        &["batch=[2,2]", "loc=[2,1,3]", "w=[4]", "item=[3,1]"],
    ] {
        let r = exec("gather_nd.et", binds, 5);
        let (batch, loc, w, item) = (r.d("batch"), r.d("loc"), r.d("w"), r.d("item"));
        let (_, src) = r.a("src");
        let (_, idx) = r.a("idx");
        let (nb, nw, ni, nl, k) = (prod(&batch), prod(&w), prod(&item), prod(&loc), loc.len());
        let mut want = vec![0.0; nb * nw * ni];
        for b in 0..nb {
            for j in 0..nw {
                let addr: Vec<usize> = (0..k).map(|c| idx[(b * nw + j) * k + c] as usize).collect();
                // RANDOM(0, DIMS(loc)[coord], INT) keeps every address in range.
                assert!(addr.iter().zip(&loc).all(|(a, l)| a < l));
                let l = ravel(&addr, &loc);
                for t in 0..ni {
                    want[(b * nw + j) * ni + t] = src[(b * nl + l) * ni + t];
                }
            }
        }
        assert_close("gather_nd", &r.a("dst").1, &want, TOL);
    }
}

#[test]
fn scatter_nd_accumulates_duplicates() {
    for binds in [&["upd=[8]", "dest=[2]", "item=[3]"][..], &["upd=[3,4]", "dest=[2,2]", "item=[]"], &["upd=[0]", "dest=[3]", "item=[2]"]] {
        let r = exec("scatter_nd.et", binds, 6);
        let (upd, dest, item) = (r.d("upd"), r.d("dest"), r.d("item"));
        let (_, idx) = r.a("idx");
        let (_, vals) = r.a("vals");
        let (nu, ni, k) = (prod(&upd), prod(&item), dest.len());
        let mut want = vec![0.0; prod(&dest) * ni];
        let mut addrs = Vec::new();
        for u in 0..nu {
            let addr: Vec<usize> = (0..k).map(|c| idx[u * k + c] as usize).collect();
            let d = ravel(&addr, &dest);
            addrs.push(d);
            for t in 0..ni {
                want[d * ni + t] += vals[u * ni + t];
            }
        }
        if nu == 8 {
            // 8 updates into 2 cells must collide: the test exercises duplicates.
            assert!(addrs.iter().any(|a| addrs.iter().filter(|b| *b == a).count() > 1));
        }
        assert_close("scatter_nd", &r.a("out").1, &want, TOL);
    }
}

#[test]
fn tile_slice_flatten() {
    for binds in [&["e=[3]", "rep=[2]"][..], &["e=[2,3]", "rep=[3,1]"]] {
        let r = exec("tile.et", binds, 7);
        let (e, rep) = (r.d("e"), r.d("rep"));
        let (_, x) = r.a("x");
        let ys: Vec<usize> = e.iter().zip(&rep).map(|(a, b)| a * b).collect();
        let want: Vec<f64> = (0..prod(&ys)).map(|o| x[ravel(&unravel(o, &ys).iter().zip(&e).map(|(i, d)| i % d).collect::<Vec<_>>(), &e)]).collect();
        let (shape, y) = r.a("y");
        assert_eq!(shape, ys);
        assert_close("tile", &y, &want, TOL);
    }
    for binds in [&["e=[9]", "lo=[2]", "hi=[3]"][..], &["e=[8,10]", "lo=[1,3]", "hi=[2,1]"]] {
        let r = exec("slice.et", binds, 8);
        let (e, lo, keep) = (r.d("e"), r.d("lo"), r.d("keep"));
        let (_, x) = r.a("x");
        let want: Vec<f64> = (0..prod(&keep)).map(|o| x[ravel(&unravel(o, &keep).iter().zip(&lo).map(|(i, l)| i + l).collect::<Vec<_>>(), &e)]).collect();
        assert_close("slice", &r.a("y").1, &want, TOL);
    }
    for binds in [&["a=[2]", "b=[]", "c=[3]"][..], &["a=[0]", "b=[2]", "c=[2]"], &["a=[2,1]", "b=[3,2]", "c=[]"]] {
        let r = exec("flatten.et", binds, 9);
        let (_, x) = r.a("x");
        let (shape, y) = r.a("y");
        assert_eq!(shape, vec![x.len()]);
        assert_close("flatten", &y, &x, TOL);
    }
}

#[test]
fn space_to_depth() {
    for binds in [&["batch=[1]", "chan=[2]"][..], &["batch=[2]", "chan=[3]"]] {
        let r = exec("space_to_depth.et", binds, 10);
        let (xs, x) = r.a("x");
        let (batch, h, w, c) = (xs[0], xs[1], xs[2], xs[3]);
        let bs = r.d("blk")[0];
        let (shape, y) = r.a("y");
        assert_eq!(shape, vec![batch, h / bs, w / bs, bs * bs * c]);
        let mut want = vec![0.0; y.len()];
        for b in 0..batch {
            for i in 0..h {
                for j in 0..w {
                    for k in 0..c {
                        let depth = ((i % bs) * bs + j % bs) * c + k;
                        want[ravel(&[b, i / bs, j / bs, depth], &shape)] = x[ravel(&[b, i, j, k], &xs)];
                    }
                }
            }
        }
        assert_close("space_to_depth", &y, &want, TOL);
    }
}

#[test]
fn meshgrid_bias_add_reduce_sum() {
    let r = exec("meshgrid.et", &["i=[2]", "j=[3]", "k=[4]"], 11);
    let (p, q, rr) = (r.a("p").1, r.a("q").1, r.a("r").1);
    for (name, f) in [("gp", 0), ("gq", 1), ("gr", 2)] {
        let want: Vec<f64> = (0..24)
            .map(|o| {
                let ix = unravel(o, &[2, 3, 4]);
                [p[ix[0]], q[ix[1]], rr[ix[2]]][f]
            })
            .collect();
        assert_close(name, &r.a(name).1, &want, TOL);
    }
    for binds in [&["batch=[2]", "pos=[3]", "chan=[4]"][..], &["batch=[1]", "pos=[]", "chan=[2]"], &["batch=[3]", "pos=[2,2]", "chan=[1]"]] {
        let r = exec("bias_add.et", binds, 12);
        let (_, x) = r.a("x");
        let (_, bias) = r.a("bias");
        let want: Vec<f64> = x.iter().enumerate().map(|(i, v)| v + bias[i % bias.len()]).collect();
        assert_close("bias_add", &r.a("y").1, &want, TOL);
    }
    for binds in [&["keep=[2,3]", "drop=[4]"][..], &["keep=[]", "drop=[5]"], &["keep=[3]", "drop=[0]"]] {
        let r = exec("reduce_sum.et", binds, 13);
        let (xs, x) = r.a("x");
        let nd = *xs.last().unwrap();
        let nk = prod(&r.d("keep"));
        let want: Vec<f64> = (0..nk).map(|i| (0..nd).map(|j| x[i * nd + j]).sum()).collect();
        assert_close("reduce_sum", &r.a("s").1, &want, TOL);
    }
}

/// Runs program text with inputs supplied; returns arrays by name.
fn exec_text(text: &str, binds: &[&str], inputs: Vec<(&str, Tensor)>) -> HashMap<String, Tensor> {
    let src = Source::from_string("t.et", text);
    let binds: Vec<String> = binds.iter().map(|s| s.to_string()).collect();
    let (m, _) = eintup::pipeline::specialized_module(&src, &binds, 0).unwrap_or_else(|f| panic!("{f}"));
    let opts = RunOptions { inputs: inputs.into_iter().map(|(n, t)| (n.to_string(), t)).collect(), ..RunOptions::default() };
    let out = run(&m, &opts).unwrap_or_else(|e| panic!("{e:?}"));
    m.arrays.iter().map(|a| a.name.clone()).zip(out).collect()
}

fn ints(shape: &[usize], v: &[i32]) -> Tensor {
    Tensor { shape: shape.to_vec(), data: eintup::tensor::Data::I32(v.to_vec()) }
}

#[test]
fn corner_cases_from_source() {
    // An out-of-bounds term skips the whole combination: y = [2+10, 3+20, 0].
    let r = exec_text(
        "x[i] = RANDOM(0, 9, INT)\nz[i] = RANDOM(0, 9, INT)\ny[i] = x[i+1] + z[i]\n",
        &["i=[3]"],
        vec![("x", ints(&[3], &[1, 2, 3])), ("z", ints(&[3], &[10, 20, 30]))],
    );
    assert_eq!(r["y"], ints(&[3], &[12, 23, 0]));
    // `=` over a partially covered region: y[keep] = 7 first, then only
    // y[0..2] are reached by e-1 for e in [1, 3).
    let r = exec_text("x[e] = RANDOM(0, 9, INT)\ny[keep] = 7\ny[e-1] = x[e]\n", &["e=[3]", "keep=[4]"], vec![("x", ints(&[3], &[4, 5, 6]))]);
    assert_eq!(r["y"], ints(&[4], &[5, 6, 7, 7]));
    // Diagonal with a repeated eintup.
    let r = exec_text("m[i,j] = RANDOM(0, 9, INT)\nd[i] = m[i,i]\n", &["i=[2]", "j=[2]"], vec![("m", ints(&[2, 2], &[1, 2, 3, 4]))]);
    assert_eq!(r["d"], ints(&[2], &[1, 4]));
    // Negative and too large gather addresses are skipped; cells stay 0.
    let r = exec_text(
        "src[l] = RANDOM(0, 9, INT)\nidx[w,c] = RANDOM(0, 3, INT)\ndst[w] = src[idx[w,:]]\n",
        &["l=[3]", "w=[4]", "c=[1]"],
        vec![("src", ints(&[3], &[10, 20, 30])), ("idx", ints(&[4, 1], &[2, -1, 3, 0]))],
    );
    assert_eq!(r["dst"], ints(&[4], &[30, 0, 0, 10]));
    // Snapshot shift.
    let r = exec_text("x[i] = RANDOM(0, 9, INT)\nx[i] = x[i+1]\n", &["i=[4]"], vec![("x", ints(&[4], &[1, 2, 3, 4]))]);
    assert_eq!(r["x"], ints(&[4], &[2, 3, 4, 4]));
}

#[test]
fn kron() {
    // NumPy's Kronecker product of two arrays of one rank: position p of
    // the result (shape i*k, dim by dim) is a[p / k] * b[p % k].
    for binds in [&["i=[3]", "k=[2]"][..], &["i=[2,3]", "k=[3,1]"], &["i=[1,2]", "k=[2,2]"]] {
        let r = exec("kron.et", binds, 11);
        let (i, k) = (r.d("i"), r.d("k"));
        let ((_, a), (_, b)) = (r.a("a"), r.a("b"));
        let ys: Vec<usize> = i.iter().zip(&k).map(|(x, y)| x * y).collect();
        let want: Vec<f64> = (0..prod(&ys))
            .map(|o| {
                let p = unravel(o, &ys);
                let outer: Vec<usize> = p.iter().zip(&k).map(|(p, d)| p / d).collect();
                let inner: Vec<usize> = p.iter().zip(&k).map(|(p, d)| p % d).collect();
                a[ravel(&outer, &i)] * b[ravel(&inner, &k)]
            })
            .collect();
        let (shape, y) = r.a("y");
        assert_eq!(shape, ys, "{binds:?}");
        assert_close("kron", &y, &want, TOL);
    }
}
