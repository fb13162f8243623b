//! Dynamic bundles (format 2, docs/bundle.md "Dynamic bundles",
//! docs/dynamic-shapes.md): a manifest's `dynamic` section checked, the
//! dims derived from the caller's input arrays, and the manifest bound to
//! them — shapes, launch sizes and dim arguments evaluated, the result an
//! ordinary manifest every other part of the runtime runs as it is. No
//! compiler is involved: this is the shape program's evaluator.

use std::collections::{BTreeMap, BTreeSet};

use crate::error::{Error, Result};
use crate::manifest::{check_launch_dims, Dynamic, Manifest, Role, Step, Variant, MAX_GRID_DIM};
use crate::shape::ShapeExpr;

impl Dynamic {
    /// Everything [`Manifest::bind`] relies on: well-formed expressions over
    /// declared symbols, one shape per buffer of its rank, one size per
    /// step, rules that name an input's existing axis, kernels' dims
    /// declared.
    pub(crate) fn validate(&self, m: &Manifest) -> Result<()> {
        let bad = |msg: String| Err(Error::BadManifest(format!("dynamic: {msg}")));
        if m.format_version < 2 {
            return bad("a dynamic bundle needs format_version 2".into());
        }
        if !m.generate.is_empty() {
            return bad("a dynamic bundle has no generators (its inputs are the caller's)".into());
        }
        let mut declared = BTreeSet::new();
        if let Some(s) = self.symbols.iter().find(|s| !declared.insert(s.as_str())) {
            return bad(format!("symbol `{s}` is declared twice"));
        }
        let known = |e: &ShapeExpr| -> Result<()> {
            let mut used = Vec::new();
            e.symbols(&mut used);
            match used.iter().find(|s| !declared.contains(s.as_str())) {
                Some(s) => bad(format!("expression uses `%{s}`, which is not among the symbols")),
                None => Ok(()),
            }
        };
        for b in &m.buffers {
            let Some(shape) = self.shapes.get(&b.name) else { return bad(format!("no shape for buffer `{}`", b.name)) };
            if shape.len() != b.shape.len() {
                return bad(format!("buffer `{}` has rank {} but its shape expression has {} axes", b.name, b.shape.len(), shape.len()));
            }
            for e in shape {
                known(&ShapeExpr::parse(e)?)?;
            }
        }
        if let Some(name) = self.shapes.keys().find(|n| m.buffer(n).is_none()) {
            return bad(format!("shape of unknown buffer `{name}`"));
        }
        if self.threads.len() != m.steps.len() {
            return bad(format!("{} launch sizes for {} steps", self.threads.len(), m.steps.len()));
        }
        for (i, (t, step)) in self.threads.iter().zip(&m.steps).enumerate() {
            match (t, step) {
                (Some(e), Step::Launch { .. }) => known(&ShapeExpr::parse(e)?)?,
                (None, Step::Fill { .. }) => {}
                _ => return bad(format!("step {i}: a launch size exactly for each launch")),
            }
        }
        for r in &self.derive {
            if !declared.contains(r.sym.as_str()) {
                return bad(format!("rule for `{}`, which is not among the symbols", r.sym));
            }
            match m.buffer(&r.input) {
                Some(b) if b.role == Role::Input && r.axis < b.shape.len() => {}
                _ => return bad(format!("rule for `{}`: `{}` has no input axis {}", r.sym, r.input, r.axis)),
            }
        }
        for c in &self.checks {
            known(&ShapeExpr::parse(&c.expr)?)?;
        }
        for e in self.eintups.values().flatten() {
            known(&ShapeExpr::parse(e)?)?;
        }
        for l in &self.index32 {
            known(&ShapeExpr::parse(&l.expr)?)?;
            if m.kernel(&l.kernel).is_none() {
                return bad(format!("index limit of unknown kernel `{}`", l.kernel));
            }
        }
        for k in &m.kernels {
            if let Some(d) = k.dims.iter().find(|d| !declared.contains(d.as_str())) {
                return bad(format!("kernel `{}` takes dim `{d}`, which is not among the symbols", k.name));
            }
        }
        for (i, v) in self.variants.iter().enumerate() {
            let at = format!("variant {i}");
            if !matches!(m.steps.get(v.step), Some(Step::Launch { .. })) {
                return bad(format!("{at}: step {} is not a launch", v.step));
            }
            let Some(k) = m.kernel(&v.kernel) else { return bad(format!("{at}: unknown kernel `{}`", v.kernel)) };
            if let Some(p) = k.params.iter().find(|p| m.buffer(p).is_none()) {
                return bad(format!("{at}: kernel `{}` takes `{p}`, which is not a buffer", v.kernel));
            }
            // A zero would skip the launch (no threads): the step's cells
            // would silently stay unwritten.
            if v.block.contains(&0) {
                return bad(format!("{at}: block {:?} has no threads", v.block));
            }
            check_launch_dims(&format!("dynamic: {at}"), &v.kernel, &[0; 3], &v.block)?;
            known(&ShapeExpr::parse(&v.threads)?)?;
            for e in &v.when {
                known(&ShapeExpr::parse(e)?)?;
            }
        }
        Ok(())
    }

    /// The variant step `step` launches at `dims`: the first whose
    /// conditions all hold, else `None` (the step's own kernel). A
    /// condition that cannot be evaluated (an overflow) does not hold.
    fn chosen(&self, step: usize, dims: &BTreeMap<String, i64>) -> Option<&Variant> {
        let holds = |e: &String| ShapeExpr::parse(e).and_then(|x| x.eval(dims)).is_ok_and(|v| v >= 0);
        self.variants.iter().find(|v| v.step == step && v.when.iter().all(holds))
    }
}

/// Run-time `--bind NAME=[d1,d2,..]`s (`NAME=[]` is rank 0), as
/// [`Manifest::given_dims`] takes them: the compiler's grammar
/// (`eintup_tensor::bind`), an eintup bound twice included.
pub fn parse_binds<S: AsRef<str>>(specs: &[S]) -> Result<Vec<(String, Vec<i64>)>> {
    let binds = eintup_tensor::bind::parse_bindings(specs).map_err(|e| Error::InvalidArgument(format!("--bind: {e}")))?;
    Ok(binds.into_iter().map(|b| (b.name, b.dims)).collect())
}

impl Manifest {
    /// The dims the input arrays of these shapes give (the `derive`
    /// rules, in order), with `given` for symbols no input gives. Every
    /// inconsistency is an [`Error::Input`] naming the input and axis, and
    /// the symbol or shape expression it contradicts, before any device
    /// is touched.
    pub fn derive_dims(&self, inputs: &BTreeMap<String, Vec<usize>>, given: &BTreeMap<String, i64>) -> Result<BTreeMap<String, i64>> {
        let Some(d) = &self.dynamic else { return Ok(BTreeMap::new()) };
        let mut dims: BTreeMap<String, i64> = given.clone();
        // Where each symbol's value came from, for messages.
        let mut from: BTreeMap<String, String> = given.iter().map(|(s, v)| (s.clone(), format!("is given as {v}"))).collect();
        for r in &d.derive {
            let Some(shape) = inputs.get(&r.input) else { continue };
            let rank = self.buffer(&r.input).map_or(0, |b| b.shape.len());
            if shape.len() != rank {
                return Err(Error::Input { name: r.input.clone(), reason: format!("has rank {}, the bundle's `{}` has rank {rank}", shape.len(), r.input) });
            }
            let v = i64::try_from(shape[r.axis]).map_err(|_| Error::Input { name: r.input.clone(), reason: "extent beyond i64".into() })?;
            match dims.insert(r.sym.clone(), v) {
                Some(old) if old != v => {
                    return Err(Error::Input {
                        name: r.input.clone(),
                        reason: format!("axis {} is {v}, but dim `{}` is {old} (from an earlier input or a given value)", r.axis, r.sym),
                    });
                }
                Some(_) => {}
                None => {
                    from.insert(r.sym.clone(), format!("`{}` gives as {v} (its dim {})", r.input, r.axis));
                }
            }
        }
        // An input's axis that is a dim another input (or a given value)
        // fixed must agree with it: said as the eintup it is and where its
        // value came from, as `run --input` says it.
        for (name, shape) in inputs {
            let Some(exprs) = d.shapes.get(name).filter(|e| e.len() == shape.len()) else { continue };
            for (axis, (e, &got)) in exprs.iter().zip(shape).enumerate() {
                // A bare symbol, `%k.0`.
                let sym = e.strip_prefix('%').unwrap_or(e);
                let Some(&want) = dims.get(sym) else { continue };
                if i64::try_from(got).is_ok_and(|g| g == want) {
                    continue;
                }
                let what = d
                    .eintups
                    .iter()
                    .find_map(|(t, comps)| {
                        comps.iter().position(|c| c == e).map(|i| if comps.len() == 1 { format!("`{t}`") } else { format!("component {i} of `{t}`") })
                    })
                    .unwrap_or_else(|| format!("dim `{sym}`"));
                let source = from.get(sym).cloned().unwrap_or_else(|| format!("is {want}"));
                return Err(Error::Input { name: name.clone(), reason: format!("dim {axis} is {got}, but it is {what}, which {source}") });
            }
        }
        if let Some(s) = d.symbols.iter().find(|s| !dims.contains_key(*s)) {
            return Err(Error::Input { name: s.clone(), reason: "this dim is given by no input: pass the input that has it, or its value".into() });
        }
        if let Some((s, v)) = dims.iter().find(|(_, &v)| v < 0) {
            return Err(Error::Input { name: s.clone(), reason: format!("is {v}: dims are non-negative") });
        }
        for c in &d.checks {
            let v = ShapeExpr::parse(&c.expr)?.eval(&dims)?;
            if v < c.min {
                let want = if c.min == 0 { "non-negative".to_string() } else { format!("at least {}", c.min) };
                return Err(Error::Input { name: c.about.clone(), reason: format!("`{}` gives {v} at these dims, but must be {want}", c.rule) });
            }
        }
        Ok(dims)
    }

    /// The symbol values that eintup dims given by a caller (`--bind
    /// NAME=[..]`) fix, through [`Dynamic::eintups`]: a component that is
    /// a symbol gives it; one the build fixed must agree; a derived one
    /// cannot be given.
    pub fn given_dims(&self, binds: &[(String, Vec<i64>)]) -> Result<BTreeMap<String, i64>> {
        let mut given = BTreeMap::new();
        let Some(d) = &self.dynamic else {
            return match binds.first() {
                Some((name, _)) => Err(Error::Input { name: name.clone(), reason: "this bundle is static: its dims are fixed".into() }),
                None => Ok(given),
            };
        };
        for (name, dims) in binds {
            let Some(exprs) = d.eintups.get(name) else {
                let known: Vec<&str> = d.eintups.keys().map(String::as_str).collect();
                return Err(Error::Input { name: name.clone(), reason: format!("is not an eintup the caller gives (those are: {})", known.join(", ")) });
            };
            if exprs.len() != dims.len() {
                return Err(Error::Input { name: name.clone(), reason: format!("has rank {} in this bundle, not {}", exprs.len(), dims.len()) });
            }
            for (e, &v) in exprs.iter().zip(dims) {
                match ShapeExpr::parse(e)? {
                    ShapeExpr::Sym(s) => {
                        given.insert(s, v);
                    }
                    ShapeExpr::Const(c) if c == v => {}
                    ShapeExpr::Const(c) => return Err(Error::Input { name: name.clone(), reason: format!("is built into this bundle as {c}, not {v}") }),
                    _ => return Err(Error::Input { name: name.clone(), reason: format!("follows from other dims (`{e}`)") }),
                }
            }
        }
        Ok(given)
    }

    /// The dims of the program's eintups at `dims` (a dynamic bundle
    /// built from a program; see [`Dynamic::eintups`]), as `--bind`
    /// values: `NAME=[d, ..]`.
    pub fn eintup_binds(&self, dims: &BTreeMap<String, i64>) -> Result<Vec<String>> {
        let Some(d) = &self.dynamic else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        for (name, exprs) in &d.eintups {
            let v = exprs.iter().map(|e| ShapeExpr::parse(e)?.eval(dims)).collect::<Result<Vec<i64>>>()?;
            out.push(format!("{name}={v:?}"));
        }
        Ok(out)
    }

    /// The bundle bound to `dims` (every symbol of a dynamic manifest; see
    /// [`Manifest::derive_dims`]): buffers' shapes, launches' grids and dim
    /// arguments evaluated, validated as any manifest (the memory limit
    /// included). A static manifest is returned as it is.
    pub fn bind(&self, dims: &BTreeMap<String, i64>) -> Result<Manifest> {
        let Some(d) = &self.dynamic else { return Ok(self.clone()) };
        let eval = |text: &str, about: &str| -> Result<i64> {
            ShapeExpr::parse(text)?.eval(dims).map_err(|e| match e {
                Error::Input { reason, .. } => Error::Input { name: about.to_string(), reason: format!("`{text}`: {reason}") },
                e => e,
            })
        };
        let mut m = self.clone();
        m.dynamic = None;
        // Each launch step's kernel: a variant whose condition holds, else
        // its own.
        let mut threads = d.threads.clone();
        for (i, step) in m.steps.iter_mut().enumerate() {
            let (Step::Launch { kernel, block, args, .. }, Some(v)) = (step, d.chosen(i, dims)) else { continue };
            let k = self.kernel(&v.kernel).ok_or_else(|| Error::BadManifest(format!("dynamic: variant of unknown kernel `{}`", v.kernel)))?;
            (*kernel, *block, *args) = (v.kernel.clone(), v.block, k.params.clone());
            if let Some(t) = threads.get_mut(i) {
                *t = Some(v.threads.clone());
            }
        }
        let launched: BTreeSet<&str> = m.steps.iter().filter_map(|s| if let Step::Launch { kernel, .. } = s { Some(kernel.as_str()) } else { None }).collect();
        // 32-bit kernels are exact only where their limits hold: checked,
        // for the kernels launched (a variant's limits may refuse dims its
        // condition never admits), before anything is launched (an
        // overflow in the limit itself is a value beyond it). Those a
        // buffer bounds first: the error then names the buffer.
        let (named, others): (Vec<_>, Vec<_>) = d.index32.iter().filter(|l| launched.contains(l.kernel.as_str())).partition(|l| l.buffer.is_some());
        for l in named.into_iter().chain(others) {
            let v = ShapeExpr::parse(&l.expr)?.eval(dims).ok();
            if v.is_none_or(|v| v > i64::from(i32::MAX)) {
                let at = v.map_or_else(|| "beyond 2^63".to_string(), |v| v.to_string());
                let (name, what) = match &l.buffer {
                    Some(b) => (b.clone(), format!("an offset into it reaches {at} (`{}`)", l.expr)),
                    None => (l.kernel.clone(), format!("kernel `{}` reaches {at} (`{}`) in its index arithmetic", l.kernel, l.expr)),
                };
                return Err(Error::Input {
                    name,
                    reason: format!(
                        "{what} at these dims; this bundle's kernels use 32-bit indices, which take buffers of fewer than 2^31 elements (at most {})",
                        i32::MAX
                    ),
                });
            }
        }
        m.config.eintups = dims.iter().map(|(s, &v)| (s.clone(), vec![v])).collect();
        for b in &mut m.buffers {
            let shape = d.shapes.get(&b.name).ok_or_else(|| Error::BadManifest(format!("dynamic: no shape for buffer `{}`", b.name)))?;
            b.shape = shape
                .iter()
                .map(|e| {
                    let v = eval(e, &b.name)?;
                    usize::try_from(v).map_err(|_| Error::Input { name: b.name.clone(), reason: format!("extent `{e}` is {v} at these dims") })
                })
                .collect::<Result<_>>()?;
        }
        for (step, threads) in m.steps.iter_mut().zip(&threads) {
            let (Step::Launch { kernel, grid, block, dims: values, .. }, Some(t)) = (step, threads) else { continue };
            let n = eval(t, kernel)?;
            if n < 0 {
                return Err(Error::BadManifest(format!("launch of `{kernel}`: its thread count `{t}` is {n} at these dims")));
            }
            let per_block = u64::from(block[0]).max(1) * u64::from(block[1]).max(1) * u64::from(block[2]).max(1);
            // The kernels are grid-stride: any grid does all the work, so a
            // large one is capped at CUDA's limit, and there is always one
            // block (a kernel without work returns at once): the thread
            // count, which a re-sealed bundle could set to 0, only sizes
            // the grid and never decides whether the work is done.
            grid[0] = (n as u64).div_ceil(per_block).clamp(1, u64::from(MAX_GRID_DIM[0])) as u32;
            grid[1] = 1;
            grid[2] = 1;
            let k = self.kernel(kernel).ok_or_else(|| Error::BadManifest(format!("launch of unknown kernel `{kernel}`")))?;
            *values = k
                .dims
                .iter()
                .map(|s| dims.get(s).copied().ok_or_else(|| Error::Input { name: s.clone(), reason: "this dim has no value".into() }))
                .collect::<Result<_>>()?;
        }
        for k in &mut m.kernels {
            // Element counts were the build configuration's.
            k.param_types.clear();
        }
        m.validate()?;
        Ok(m)
    }
}
