//! Verifier of the `loop` dialect: the structural rules every pass must
//! keep and every consumer (interpreter, code generators) relies on. The
//! rules are listed in docs/ir-loop.md ("Verifier").
//!
//! The first violation is returned as a [`VerifyError`]: a message naming
//! the kernel (or buffer) and what is wrong, and the [`Site`] it is about.
//! For a module parsed from text the site locates the error at its line
//! (`parse::parse_verified`); for one built by a pass, `describe` adds the
//! offending line as the printer writes it.

use super::print;
use super::site::{Site, Spans};
use super::*;
use crate::ir::text::{is_ident, Spelled};
use et_grammar::Diagnostic;
use std::collections::{HashMap, HashSet};
use std::fmt;

/// The largest magnitude of a constant loop bound (2^48).
pub const MAX_LOOP_BOUND: i64 = 1 << 48;

mod blocks;
pub use blocks::MAX_SHARED_BYTES;

/// Code of a verifier error located in parsed text (docs/ir-loop.md).
pub const CODE: &str = "E0651";

/// A violated rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    /// What the error is about.
    pub site: Site,
    /// Names the kernel (or buffer) and what is wrong.
    pub message: String,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl VerifyError {
    /// The error as a diagnostic located at its site in the parsed text
    /// (or at the nearest enclosing site the text has).
    pub fn diagnostic(&self, spans: &Spans) -> Diagnostic {
        let d = Diagnostic::error(CODE, format!("the module does not verify: {}", self.message));
        let what = match self.site {
            Site::Module => "in this module",
            Site::Buffer(_) => "this buffer",
            Site::Kernel(_) => "this kernel",
            Site::Node(..) => "this node",
            Site::Value(..) => "this value",
            Site::Write(..) => "this write",
        };
        match spans.get(&self.site) {
            Some(sp) => d.at(sp, what),
            None => d,
        }
    }

    /// The message, and the site's line as `print` writes it: where the
    /// error is in a module that has no text.
    pub fn describe(&self, m: &LoopModule) -> String {
        match print::site_line(m, &self.site) {
            Some(line) => format!("{}\n  at: {}", self.message, line.trim()),
            None => self.message.clone(),
        }
    }
}

/// Checks a module; `Err` holds the first violation.
pub fn verify(m: &LoopModule) -> Result<(), VerifyError> {
    dims(m)?;
    buffers(m)?;
    // Names seen so far, in a map: linear in the number of kernels (a scan
    // of the earlier kernels made 20,000 statements take a minute).
    let mut names: HashMap<&str, usize> = HashMap::new();
    for (i, k) in m.kernels.iter().enumerate() {
        let err = |message| VerifyError { site: Site::Kernel(i), message };
        if !is_ident(&k.name) {
            return Err(err(format!("kernel #{i}: name `{}` is not an identifier", k.name)));
        }
        if let Some(j) = names.insert(k.name.as_str(), i) {
            return Err(err(format!("kernel `@{}`: name already used by kernel #{j}", k.name)));
        }
        kernel(m, i, k)?;
        blocks::kernel(m, i, k)?;
    }
    blocks::scratch_owners(m)
}

/// The first dim symbol of `e` the module does not declare.
fn undeclared_sym(m: &LoopModule, e: &IExpr) -> Option<DimId> {
    let mut bad = None;
    e.for_each_sym(&mut |d| {
        if d >= m.dims.len() && bad.is_none() {
            bad = Some(d);
        }
    });
    bad
}

/// Dim names: an identifier, or one and a component (`batch.0`), so
/// every one prints as `%NAME` and parses back.
fn is_dim_name(name: &str) -> bool {
    let (base, comp) = name.split_once('.').unwrap_or((name, "0"));
    is_ident(base) && !comp.is_empty() && comp.bytes().all(|c| c.is_ascii_digit()) && comp.parse::<usize>().is_ok_and(|n| n.to_string() == comp)
}

fn dims(m: &LoopModule) -> Result<(), VerifyError> {
    let mut names = HashSet::new();
    for (i, d) in m.dims.iter().enumerate() {
        let err = |message| Err(VerifyError { site: Site::Module, message });
        if !is_dim_name(&d.name) {
            return err(format!("dim #{i}: name `{}` is not an identifier (optionally `.N`)", d.name));
        }
        if !names.insert(d.name.as_str()) {
            return err(format!("dim `%{}` is declared twice", d.name));
        }
    }
    Ok(())
}

fn buffers(m: &LoopModule) -> Result<(), VerifyError> {
    let mut names = HashSet::new();
    for (i, b) in m.buffers.iter().enumerate() {
        let err = |message| Err(VerifyError { site: Site::Buffer(i), message });
        if !is_ident(&b.name) {
            return err(format!("buffer #{i}: name `{}` is not an identifier", b.name));
        }
        if !names.insert(b.name.as_str()) {
            return err(format!("buffer `{}` is declared twice", b.name));
        }
        // A shape is fixed for the whole run: dim symbols only, no loop
        // variable.
        if let Some(e) = b.shape.iter().find(|e| e.uses_any_var()) {
            return err(format!("buffer `{}`: extent `{}` uses a loop variable", b.name, print::shape_extent(m, e)));
        }
        if let Some(d) = b.shape.iter().find_map(|e| undeclared_sym(m, e)) {
            return err(format!("buffer `{}`: dim symbol id {d} out of range (the module declares {})", b.name, m.dims.len()));
        }
        // Scratch lives in registers or shared memory, sized when the
        // kernel is compiled.
        if b.role.is_scratch() && b.dims().is_none() {
            return err(format!("buffer `{}`: a {} buffer needs a constant shape", b.name, b.role.spelling()));
        }
        if let Some(d) = b.shape.iter().filter_map(IExpr::as_const).find(|&d| d < 0) {
            return err(format!("buffer `{}` has a negative dimension {d}", b.name));
        }
        // `Buffer::len` multiplies in i64; refuse shapes where that
        // overflows (symbolic extents: the shape program checks at run time).
        if b.dims().is_some_and(|d| d.iter().try_fold(1i64, |acc, &d| acc.checked_mul(d)).is_none()) {
            return err(format!("buffer `{}`: element count overflows i64", b.name));
        }
        if b.init != b.role.default_init() {
            let (role, init) = (b.role.spelling(), b.init.spelling());
            return err(format!("buffer `{}`: role `{role}` with init `{init}` (init is `input` exactly for role `input`)", b.name));
        }
    }
    Ok(())
}

struct Ck<'a> {
    m: &'a LoopModule,
    k: &'a Kernel,
    /// The kernel's number in the module.
    ki: usize,
    /// Positions of the node being checked (see `Site::Node`).
    path: Vec<usize>,
    /// How many nodes bind each variable.
    bound: Vec<usize>,
    /// Variables in scope at the current node.
    visible: Vec<bool>,
}

fn kernel(m: &LoopModule, ki: usize, k: &Kernel) -> Result<(), VerifyError> {
    let mut ck = Ck { m, k, ki, path: Vec::new(), bound: vec![0; k.vars.len()], visible: vec![false; k.vars.len()] };
    let mut names = HashSet::new();
    for (i, v) in k.vars.iter().enumerate() {
        if !is_ident(&v.name) {
            return Err(ck.at(Site::Kernel(ki), format!("variable #{i}: name `{}` is not an identifier", v.name)));
        }
        if !names.insert(v.name.as_str()) {
            return Err(ck.at(Site::Kernel(ki), format!("two variables are named `{}`", v.name)));
        }
    }
    for (i, &(d, n)) in k.multiples.facts.iter().enumerate() {
        if d >= m.dims.len() || n < 2 || k.multiples.facts[..i].iter().any(|f| f.0 == d) {
            return Err(ck.at(Site::Kernel(ki), format!("multiples: fact #{i} (dim #{d}, {n}) names an undeclared or repeated dim, or a multiple below 2")));
        }
    }
    // A variable that is never bound is allowed: passes that delete an
    // empty loop leave its declaration behind, and any use of it is
    // caught as a use outside its scope.
    ck.nodes(&k.body)
}

impl Ck<'_> {
    /// An error about `site`, naming the kernel.
    fn at(&self, site: Site, msg: String) -> VerifyError {
        VerifyError { site, message: format!("kernel `@{}`: {msg}", self.k.name) }
    }

    fn node_site(&self) -> Site {
        Site::Node(self.ki, self.path.clone())
    }

    fn var_name(&self, v: VarId) -> String {
        self.k.vars.get(v).map_or_else(|| format!("#{v}"), |x| x.name.clone())
    }

    fn buffer(&self, b: BufId, what: &str) -> Result<&Buffer, String> {
        self.m.buffers.get(b).ok_or_else(|| format!("{what}: buffer id {b} out of range (the module has {} buffers)", self.m.buffers.len()))
    }

    /// Every variable of `e` exists and is in scope here, and every dim
    /// symbol is declared.
    fn expr(&self, e: &IExpr, what: &str) -> Result<(), String> {
        let mut err = undeclared_sym(self.m, e).map(|d| format!("{what}: dim symbol id {d} out of range (the module declares {})", self.m.dims.len()));
        e.for_each_var(&mut |v| {
            if err.is_some() {
                return;
            }
            if v >= self.k.vars.len() {
                err = Some(format!("{what}: variable id {v} out of range (the kernel has {} variables)", self.k.vars.len()));
            } else if !self.visible[v] {
                err = Some(format!("{what}: variable `{}` used outside its scope", self.var_name(v)));
            }
        });
        err.map_or(Ok(()), Err)
    }

    fn bind(&mut self, v: VarId, what: &str) -> Result<(), String> {
        if v >= self.k.vars.len() {
            return Err(format!("{what}: binds variable id {v}, out of range (the kernel has {} variables)", self.k.vars.len()));
        }
        self.bound[v] += 1;
        if self.bound[v] > 1 {
            return Err(format!("variable `{}` is bound twice", self.var_name(v)));
        }
        self.visible[v] = true;
        Ok(())
    }

    fn nodes(&mut self, ns: &[Node]) -> Result<(), VerifyError> {
        // load_index variables stay in scope for the rest of this list.
        let mut loaded = Vec::new();
        for (i, n) in ns.iter().enumerate() {
            self.path.push(i);
            match n {
                Node::Compute(c) => self.compute(c)?,
                Node::For(l) => {
                    self.node(n).map_err(|e| self.at(self.node_site(), e))?;
                    self.nodes(&l.body)?;
                    self.visible[l.var] = false;
                }
                Node::Guard(g) => {
                    self.node(n).map_err(|e| self.at(self.node_site(), e))?;
                    self.nodes(&g.body)?;
                }
                Node::LoadIndex { var, .. } => {
                    self.node(n).map_err(|e| self.at(self.node_site(), e))?;
                    loaded.push(*var);
                }
                Node::Sync | Node::Copies(_) => {}
            }
            self.path.pop();
        }
        for v in loaded {
            self.visible[v] = false;
        }
        Ok(())
    }

    /// The node's own rules (not its body's): bounds, conditions, the
    /// load_index buffer, and the variable it binds.
    fn node(&mut self, n: &Node) -> Result<(), String> {
        match n {
            Node::For(l) => {
                let what = format!("loop over `{}`", self.var_name(l.var));
                self.expr(&l.lo, &format!("lower bound of {what}"))?;
                self.expr(&l.hi, &format!("upper bound of {what}"))?;
                // The passes compute trips, tiles and lane steps in i64:
                // constant bounds stay within +-2^48 (no buffer is that
                // long; docs/limits.md), so that arithmetic cannot overflow.
                for b in [l.lo.as_const(), l.hi.as_const()].into_iter().flatten() {
                    if b.unsigned_abs() > MAX_LOOP_BOUND as u64 {
                        return Err(format!("{what}: bound {b} is beyond +-2^48"));
                    }
                }
                if l.kind == LoopKind::Unroll {
                    match (l.lo.as_const(), l.hi.as_const()) {
                        (Some(lo), Some(hi)) if hi.saturating_sub(lo) <= MAX_UNROLL => {}
                        (Some(_), Some(_)) => return Err(format!("{what}: an `unroll` loop has at most {MAX_UNROLL} iterations")),
                        _ => return Err(format!("{what}: an `unroll` loop needs constant bounds")),
                    }
                }
                self.bind(l.var, &what)
            }
            Node::Guard(g) => g.conds.iter().flat_map(|c| c.exprs()).try_for_each(|e| self.expr(e, "guard condition")),
            Node::LoadIndex { var, buf, offset } => {
                let what = format!("load_index `{}`", self.var_name(*var));
                let b = self.buffer(*buf, &what)?;
                if b.dtype != DType::I32 {
                    return Err(format!("{what}: buffer `{}` is {}, not i32", b.name, b.dtype.name()));
                }
                self.expr(offset, &format!("offset of {what}"))?;
                self.bind(*var, &what)
            }
            Node::Compute(_) | Node::Sync | Node::Copies(_) => Ok(()),
        }
    }

    fn compute(&self, c: &Compute) -> Result<(), VerifyError> {
        for (i, v) in c.values.iter().enumerate() {
            self.value(c, i, v).map_err(|e| self.at(Site::Value(self.ki, self.path.clone(), i), e))?;
        }
        self.write(c).map_err(|e| self.at(Site::Write(self.ki, self.path.clone()), e))
    }

    /// Value `%i` of compute `c`.
    fn value(&self, c: &Compute, i: ValId, v: &Value) -> Result<(), String> {
        let what = format!("value %{i}");
        // An operand: defined earlier in this compute; its dtype.
        let operand = |a: ValId| -> Result<DType, String> {
            if a >= i {
                return Err(format!("{what} uses %{a}, which is not defined before it"));
            }
            Ok(c.values[a].dtype)
        };
        let same = |a: ValId, role: &str| -> Result<(), String> {
            let d = operand(a)?;
            if d != v.dtype {
                return Err(format!("{what} is {} but its {role} %{a} is {}", v.dtype.name(), d.name()));
            }
            Ok(())
        };
        let need_i32 = |op: &str| -> Result<(), String> {
            if v.dtype != DType::I32 {
                return Err(format!("{what}: `{op}` gives i32, not {}", v.dtype.name()));
            }
            Ok(())
        };
        match &v.op {
            VOp::Const(x) => {
                if v.dtype == DType::I32 && !(x.fract() == 0.0 && *x >= i32::MIN as f64 && *x <= i32::MAX as f64) {
                    return Err(format!("{what}: i32 constant {x:?} is not an integer in the i32 range"));
                }
            }
            VOp::Load { buf, offset } => {
                let b = self.buffer(*buf, &what)?;
                if b.dtype != v.dtype {
                    return Err(format!("{what} is {} but loads buffer `{}` of {}", v.dtype.name(), b.name, b.dtype.name()));
                }
                self.expr(offset, &format!("offset of {what}"))?;
            }
            VOp::Index(e) => {
                need_i32("index")?;
                self.expr(e, &what)?;
            }
            VOp::Lookup { index, .. } => {
                need_i32("lookup")?;
                self.expr(index, &what)?;
            }
            VOp::Random { counter, lo, hi, .. } => {
                same(*lo, "lower bound")?;
                same(*hi, "upper bound")?;
                self.expr(counter, &format!("counter of {what}"))?;
            }
            VOp::Neg(a) => same(*a, "operand")?,
            VOp::Bin(op, a, b) => {
                if *op == BinOp::Div && !v.dtype.is_float() {
                    return Err(format!("{what}: `{}` on {} (only on floats)", op.spelling(), v.dtype.name()));
                }
                same(*a, "left operand")?;
                same(*b, "right operand")?;
            }
            VOp::Cast(a) => {
                operand(*a)?;
            }
            VOp::Cmp(_, a, b) => {
                need_i32("a comparison")?;
                let d = operand(*a)?;
                if operand(*b)? != d {
                    return Err(format!("{what}: compares %{a} of {} with %{b} of {}", d.name(), operand(*b)?.name()));
                }
            }
            VOp::Call(f, args) => {
                if args.len() != f.arity() {
                    return Err(format!("{what}: `{}` takes {} operands, not {}", f.name(), f.arity(), args.len()));
                }
                if f.always_float() && !v.dtype.is_float() {
                    return Err(format!("{what}: `{}` gives a float, not {}", f.name(), v.dtype.name()));
                }
                // `select`'s condition may be of any dtype.
                let skip = usize::from(*f == Func::Select);
                if let Some(&c) = args.first().filter(|_| skip == 1) {
                    operand(c)?;
                }
                for &a in &args[skip..] {
                    same(a, "operand")?;
                }
            }
        }
        Ok(())
    }

    /// The write that ends compute `c`.
    fn write(&self, c: &Compute) -> Result<(), String> {
        let w = &c.write;
        let what = format!("{} write", w.kind.spelling());
        let b = self.buffer(w.buf, &what)?;
        let Some(v) = c.values.get(w.value) else {
            return Err(format!("{what} to `{}`: value %{} is not defined (the compute has {} values)", b.name, w.value, c.values.len()));
        };
        if v.dtype != b.dtype {
            return Err(format!("{what} to `{}`: value %{} is {} but the buffer is {}", b.name, w.value, v.dtype.name(), b.dtype.name()));
        }
        self.expr(&w.offset, &format!("offset of {what} to `{}`", b.name))
    }
}

#[cfg(test)]
mod tests {
    use super::super::parse::{parse_module, parse_verified};
    use super::*;

    #[test]
    fn load_index_scope_is_later_siblings_and_their_descendants() {
        let k = Kernel {
            name: "k".into(),
            role: KernelRole::Main,
            stmt: None,
            multiples: Multiples::default(),
            vars: vec![Var { name: "t".into() }, Var { name: "u".into() }],
            body: vec![
                Node::Guard(Guard { conds: vec![], body: vec![Node::LoadIndex { var: 0, buf: 0, offset: IExpr::c(0) }] }),
                // `t` was loaded inside the guard: out of scope here.
                Node::LoadIndex { var: 1, buf: 0, offset: IExpr::v(0) },
            ],
        };
        let b = Buffer { name: "idx".into(), dtype: DType::I32, shape: static_shape(&[2]), role: Role::Temp, init: Init::Zero };
        let m = LoopModule { facts: Facts::NONE, dims: vec![], buffers: vec![b], kernels: vec![k] };
        let e = verify(&m).unwrap_err();
        assert!(e.message.contains("`@k`") && e.message.contains("`t` used outside its scope"), "{e}");
        assert_eq!(e.site, Site::Node(0, vec![1]));
        // Without text, the error shows the offending line as printed.
        assert_eq!(e.describe(&m), format!("{}\n  at: u = load_index idx[t]", e.message));
    }

    const TEXT: &str = "\
// A comment line first: spans count it.
buffer y : f64[4] output
buffer n : i32[4] input
kernel @ok {
}
kernel @kk {
  for i in [0, 4) reduce {
    guard i != 0 {
      %0 = const 1.0 : f64
      %1 = load n[i] : f64
      store y[i] = %1
    }
  }
}
";

    /// The line and column a verifier error of `text` is reported at, and
    /// the rendered diagnostic.
    fn located(text: &str) -> ((usize, usize), String) {
        let d = parse_verified(text).expect_err("must not verify");
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].code, CODE);
        let sp = d[0].primary_span().expect("located");
        (et_grammar::span::line_col(text, sp.start), d[0].render("t.etir", text))
    }

    #[test]
    fn errors_in_parsed_text_point_at_their_line() {
        // A value: its own line.
        let (at, r) = located(TEXT);
        assert_eq!(at, (10, 7), "{r}");
        assert!(r.starts_with("t.etir:10:7: error[E0651]: the module does not verify: kernel `@kk`: value %1 is f64 but loads buffer `n` of i32\n"), "{r}");
        assert!(r.contains("10 |       %1 = load n[i] : f64\n   |       ^^^^^^^^^^^^^^^^^^^^ this value"), "{r}");
        // A write.
        let t = TEXT.replace("%1 = load n[i] : f64", "%1 = const 2.0 : f64").replace("store y[i] = %1", "store y[i] = %7");
        assert_eq!(located(&t).0, (11, 7));
        // A node: the loop header, up to its `{`.
        let t = TEXT.replace("guard i != 0 {", "for i in [0, 4) reduce {");
        let (at, r) = located(&t);
        assert_eq!(at, (8, 5), "{r}");
        assert!(r.contains("`i` is bound twice"), "{r}");
        // A buffer and a kernel.
        assert_eq!(located(&TEXT.replace("i32[4] input", "i32[4] input init(zero)")).0, (3, 1));
        assert_eq!(located(&TEXT.replace("kernel @kk", "kernel @ok")).0, (6, 1));
        // A module that verifies parses as `parse_module` does.
        let good = TEXT.replace("load n[i] : f64", "load y[i] : f64");
        assert_eq!(parse_verified(&good), parse_module(&good));
    }
}
