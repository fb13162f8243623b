//! Dim symbols (docs/dynamic-shapes.md): which parts of a module depend
//! on them, and the module at one configuration of them (`bind_dims`), as
//! the loop interpreter runs it and as a pass that cannot handle a
//! symbolic trip count sees it.

use super::*;

impl LoopModule {
    /// Does the module declare dim symbols (a dynamic module)?
    pub fn is_dynamic(&self) -> bool {
        !self.dims.is_empty()
    }

    /// The module with dim symbol `d` fixed to `values[d]`: every shape
    /// and index expression folded where it becomes constant, no symbols
    /// left. Refuses a wrong number of values, a negative one, and a
    /// configuration that gives a buffer a negative extent (the shape
    /// program's checks, for modules run without one).
    pub fn bind_dims(&self, values: &[i64]) -> Result<LoopModule, String> {
        if values.len() != self.dims.len() {
            return Err(format!("{} dim values given for the module's {} dim symbols", values.len(), self.dims.len()));
        }
        if let Some((d, v)) = self.dims.iter().zip(values).find(|(_, &v)| v < 0) {
            return Err(format!("dim `%{}` is {v}: dims are non-negative", d.name));
        }
        let mut m = LoopModule { dims: Vec::new(), ..self.clone() };
        for (b, src) in m.buffers.iter_mut().zip(&self.buffers) {
            for (e, orig) in b.shape.iter_mut().zip(&src.shape) {
                *e = e.bind_dims(values);
                match e.as_const() {
                    Some(x) if x >= 0 => {}
                    _ => return Err(format!("buffer `{}`: extent `{}` is {} at these dims", b.name, print::shape_extent(self, orig), e.eval(&[]))),
                }
            }
        }
        for k in &mut m.kernels {
            k.for_each_expr_mut(&mut |e| *e = e.bind_dims(values));
            // Facts about symbols that are constants now (a run-time
            // variant's): nothing left to state them of.
            k.multiples = Multiples::default();
        }
        Ok(m)
    }
}

impl Node {
    /// Does the node, or any node inside it, use a dim symbol?
    pub fn uses_dims(&self) -> bool {
        let mut any = false;
        self.walk(&mut |n| any |= n.own_exprs().iter().any(|e| e.is_symbolic()));
        any
    }
}

impl Kernel {
    /// Does any bound, condition or offset of the kernel use a dim symbol?
    /// Passes that need constant trip counts leave such a kernel alone.
    /// The dim symbols the kernel uses, ascending: on the GPU, its scalar
    /// parameters after the buffers' pointers, in this order
    /// (docs/codegen.md, "Kernel ABI").
    pub fn dims_used(&self) -> Vec<DimId> {
        let mut out = Vec::new();
        self.walk(&mut |n| {
            for e in n.own_exprs() {
                e.for_each_sym(&mut |d| {
                    if !out.contains(&d) {
                        out.push(d);
                    }
                });
            }
        });
        out.sort_unstable();
        out
    }

    pub fn is_symbolic(&self) -> bool {
        self.body.iter().any(Node::uses_dims)
    }
}
