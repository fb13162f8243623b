//! Verifier of the `loop` dialect: the structural rules every pass must
//! keep and every consumer (interpreter, code generators) relies on. The
//! rules are listed in docs/ir-loop.md ("Verifier"). Returns the first
//! violation as a message naming the kernel (or buffer) and what is wrong.

use super::*;

/// Checks a module; `Err` holds one human-readable message.
pub fn verify(m: &LoopModule) -> Result<(), String> {
    buffers(m)?;
    for (i, k) in m.kernels.iter().enumerate() {
        if !is_ident(&k.name) {
            return Err(format!("kernel #{i}: name `{}` is not an identifier", k.name));
        }
        if let Some(j) = m.kernels[..i].iter().position(|o| o.name == k.name) {
            return Err(format!("kernel `@{}`: name already used by kernel #{j}", k.name));
        }
        kernel(m, k).map_err(|e| format!("kernel `@{}`: {e}", k.name))?;
    }
    Ok(())
}

/// `[A-Za-z_][A-Za-z0-9_]*`: what the parser reads as a name.
pub fn is_ident(s: &str) -> bool {
    let mut cs = s.chars();
    matches!(cs.next(), Some(c) if c.is_ascii_alphabetic() || c == '_') && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn buffers(m: &LoopModule) -> Result<(), String> {
    for (i, b) in m.buffers.iter().enumerate() {
        if !is_ident(&b.name) {
            return Err(format!("buffer #{i}: name `{}` is not an identifier", b.name));
        }
        if m.buffers[..i].iter().any(|o| o.name == b.name) {
            return Err(format!("buffer `{}` is declared twice", b.name));
        }
        if let Some(d) = b.shape.iter().find(|&&d| d < 0) {
            return Err(format!("buffer `{}` has a negative dimension {d}", b.name));
        }
        // `Buffer::len` multiplies in i64; refuse shapes where that overflows.
        if b.shape.iter().try_fold(1i64, |acc, &d| acc.checked_mul(d)).is_none() {
            return Err(format!("buffer `{}`: element count overflows i64", b.name));
        }
        if (b.role == Role::Input) != (b.init == Init::Input) {
            return Err(format!("buffer `{}`: role {:?} with init {:?} (init is `Input` exactly for role `Input`)", b.name, b.role, b.init));
        }
    }
    Ok(())
}

struct Ck<'a> {
    m: &'a LoopModule,
    k: &'a Kernel,
    /// How many nodes bind each variable.
    bound: Vec<usize>,
    /// Variables in scope at the current node.
    visible: Vec<bool>,
}

fn kernel(m: &LoopModule, k: &Kernel) -> Result<(), String> {
    for (i, v) in k.vars.iter().enumerate() {
        if !is_ident(&v.name) {
            return Err(format!("variable #{i}: name `{}` is not an identifier", v.name));
        }
        if k.vars[..i].iter().any(|o| o.name == v.name) {
            return Err(format!("two variables are named `{}`", v.name));
        }
    }
    let mut ck = Ck { m, k, bound: vec![0; k.vars.len()], visible: vec![false; k.vars.len()] };
    // A variable that is never bound is allowed: passes that delete an
    // empty loop leave its declaration behind, and any use of it is
    // caught as a use outside its scope.
    ck.nodes(&k.body)
}

impl Ck<'_> {
    fn var_name(&self, v: VarId) -> String {
        self.k.vars.get(v).map_or_else(|| format!("#{v}"), |x| x.name.clone())
    }

    fn buffer(&self, b: BufId, what: &str) -> Result<&Buffer, String> {
        self.m.buffers.get(b).ok_or_else(|| format!("{what}: buffer id {b} out of range (the module has {} buffers)", self.m.buffers.len()))
    }

    /// Every variable of `e` exists and is in scope here.
    fn expr(&self, e: &IExpr, what: &str) -> Result<(), String> {
        let mut err = None;
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

    fn nodes(&mut self, ns: &[Node]) -> Result<(), String> {
        // load_index variables stay in scope for the rest of this list.
        let mut loaded = Vec::new();
        for n in ns {
            match n {
                Node::For(l) => {
                    let what = format!("loop over `{}`", self.var_name(l.var));
                    self.expr(&l.lo, &format!("lower bound of {what}"))?;
                    self.expr(&l.hi, &format!("upper bound of {what}"))?;
                    self.bind(l.var, &what)?;
                    self.nodes(&l.body)?;
                    self.visible[l.var] = false;
                }
                Node::Guard(g) => {
                    for c in &g.conds {
                        for e in c.exprs() {
                            self.expr(e, "guard condition")?;
                        }
                    }
                    self.nodes(&g.body)?;
                }
                Node::LoadIndex { var, buf, offset } => {
                    let what = format!("load_index `{}`", self.var_name(*var));
                    let b = self.buffer(*buf, &what)?;
                    if b.dtype != DType::I32 {
                        return Err(format!("{what}: buffer `{}` is {}, not i32", b.name, b.dtype.name()));
                    }
                    self.expr(offset, &format!("offset of {what}"))?;
                    self.bind(*var, &what)?;
                    loaded.push(*var);
                }
                Node::Compute(c) => self.compute(c)?,
            }
        }
        for v in loaded {
            self.visible[v] = false;
        }
        Ok(())
    }

    fn compute(&self, c: &Compute) -> Result<(), String> {
        for (i, v) in c.values.iter().enumerate() {
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
                    if *op == VBin::Div && !v.dtype.is_float() {
                        return Err(format!("{what}: `div` on {} (only on floats)", v.dtype.name()));
                    }
                    same(*a, "left operand")?;
                    same(*b, "right operand")?;
                }
                VOp::Cast(a) => {
                    operand(*a)?;
                }
            }
        }
        let w = &c.write;
        let what = format!("{} write", w.kind.text());
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
    use super::*;

    #[test]
    fn identifiers() {
        assert!(is_ident("y_main") && is_ident("_t3") && is_ident("A9"));
        assert!(!is_ident("") && !is_ident("3a") && !is_ident("a-b") && !is_ident("é"));
    }

    #[test]
    fn load_index_scope_is_later_siblings_and_their_descendants() {
        let k = Kernel {
            name: "k".into(),
            vars: vec![Var { name: "t".into() }, Var { name: "u".into() }],
            body: vec![
                Node::Guard(Guard { conds: vec![], body: vec![Node::LoadIndex { var: 0, buf: 0, offset: IExpr::c(0) }] }),
                // `t` was loaded inside the guard: out of scope here.
                Node::LoadIndex { var: 1, buf: 0, offset: IExpr::v(0) },
            ],
        };
        let b = Buffer { name: "idx".into(), dtype: DType::I32, shape: vec![2], role: Role::Temp, init: Init::Zero };
        let m = LoopModule { buffers: vec![b], kernels: vec![k] };
        let e = verify(&m).unwrap_err();
        assert!(e.contains("`@k`") && e.contains("`t` used outside its scope"), "{e}");
    }
}
