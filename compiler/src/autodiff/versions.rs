//! Array versions: a program that writes an array again is rewritten so
//! that each write makes a new array (`x__1`), first copied from the old
//! one (the partial-overwrite rule keeps the cells the write does not
//! reach), and every later read names the newest. Then each array holds
//! one value for the whole program, which the adjoint statements read
//! after every forward statement has run. Reads of the array in the
//! rewriting statement itself already mean the old value (the snapshot
//! rule), so they name the old version.

use super::expr::{statement, Expr};
use crate::ir::et::{print, ArrayId, IndexKind, IndexSlot, Module, OpKind, Stmt};
use crate::sema::Program;
use et_grammar::ast::AssignOp;
use et_grammar::Diagnostic;

/// The program's statements with versions, as `.et` lines, and the name
/// of each array's last version.
pub struct Versioned {
    pub lines: Vec<String>,
    pub last: Vec<String>,
}

pub fn versioned(prog: &Program, fresh: &mut impl FnMut(&str) -> String) -> Result<Versioned, Diagnostic> {
    let mut m: Module = prog.module.clone();
    let original = m.arrays.len();
    let mut current: Vec<ArrayId> = (0..original).collect();
    let mut lines = Vec::new();
    for (si, s) in prog.module.stmts.iter().enumerate() {
        let mut s2 = s.clone();
        remap_reads(&mut s2, &current);
        let a = s.array;
        if si != prog.module.arrays[a].def_stmt {
            let arr = &prog.module.arrays[a];
            let mut seen = Vec::new();
            for p in &arr.positions {
                match p.expr.kind {
                    IndexKind::Var(t) if !seen.contains(&t) => seen.push(t),
                    _ => {
                        return Err(Diagnostic::error("E0803", format!("cannot differentiate a program that writes `{}` again: its first mention has a position that is not a distinct eintup (`{}`), so no statement can copy it whole", arr.name, print::index_expr(&prog.module, &p.expr)))
                            .at(s.span, "written again here")
                            .also(arr.span, "first mentioned here"))
                    }
                }
            }
            let old = current[a];
            let mut copy = arr.clone();
            copy.name = fresh(&format!("{}__{}", arr.name, m.arrays.len() - original + 1));
            let new = m.arrays.len();
            m.arrays.push(copy);
            let slots: Vec<IndexSlot> = arr.positions.iter().map(|p| IndexSlot::Expr(p.expr.clone())).collect();
            lines.push(statement(&m, &m.arrays[new].name, &slots, AssignOp::Assign, &Expr::read(&m.arrays[old].name, &slots)));
            current[a] = new;
        }
        s2.array = current[a];
        lines.push(statement(&m, &m.arrays[s2.array].name, &s2.indices, s2.op, &Expr::of_op(&m, &s2, s2.result)));
    }
    let last = current.iter().map(|&a| m.arrays[a].name.clone()).collect();
    Ok(Versioned { lines, last })
}

/// Points every read and slice of `s` at the current version.
fn remap_reads(s: &mut Stmt, current: &[ArrayId]) {
    fn slot(x: &mut IndexSlot, current: &[ArrayId]) {
        if let IndexSlot::Expr(e) = x {
            expr(e, current)
        }
    }
    fn expr(e: &mut crate::ir::et::IndexExpr, current: &[ArrayId]) {
        match &mut e.kind {
            IndexKind::Slice { array, indices } => {
                *array = current[*array];
                indices.iter_mut().for_each(|x| slot(x, current));
            }
            IndexKind::Flat(v) => v.iter_mut().for_each(|x| expr(x, current)),
            IndexKind::Bin(_, a, b) => {
                expr(a, current);
                expr(b, current);
            }
            IndexKind::Var(_) | IndexKind::Lit(_) | IndexKind::Dims(_) | IndexKind::Rank(_) => {}
        }
    }
    s.indices.iter_mut().for_each(|x| slot(x, current));
    for op in &mut s.ops {
        match &mut op.kind {
            OpKind::Read { array, indices } => {
                *array = current[*array];
                indices.iter_mut().for_each(|x| slot(x, current));
            }
            OpKind::DimsAt(_, t) => expr(t, current),
            _ => {}
        }
    }
}
