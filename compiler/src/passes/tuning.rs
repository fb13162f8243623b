//! How a GPU pass picks one of its candidates: a choice forced by the
//! pass's `choice=` option, else the choice the tuning table recorded for
//! the nearest kernel shape measured on this architecture, else the pass's
//! own heuristic (its first candidate). Issue #30 item 6;
//! docs/tuning.md.
//!
//! The table (`compiler/tuning/sm_XX.json`, compiled in) is written by
//! `scripts/gpu-check import` from what `KIT/run OUT --tune` measured on a
//! GPU: for each benchmark kernel, the candidate of each pass that was
//! fastest, keyed by the kernel's [`KernelShape`] as that pass saw it.
//! A pass names its candidates by a description of their own
//! (`register-tiles`: `8x8@0`; `block-tiles`: `16x16k16`;
//! `arrange-threads`: `4x8g16`), the same in
//! the `choice=` option, the table and `--stats`.

use crate::ir::loops::chain::Chain;
use crate::ir::loops::{Compute, Kernel, LoopKind, LoopModule, Node, VOp};
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// What identifies a kernel for the table: the element type it writes,
/// the trips of its parallel chain (outermost first), of the `reduce`
/// and `unroll` loops below the chain (in walk order), and how many values
/// its sum loads. Two kernels of the same *form* (all but the chain and
/// reduce trips equal) compare by size.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelShape {
    pub dtype: String,
    pub chain: Vec<i64>,
    pub reduce: Vec<i64>,
    pub unroll: Vec<i64>,
    pub loads: usize,
}

impl KernelShape {
    /// The shape of `k`, when it accumulates into one buffer from one
    /// computation (the kernels the tuned passes reshape; a tiled kernel's
    /// clear is not the sum's cell by variable any more, so not
    /// [`Kernel::sum`]) and its loops below the chain have constant trips.
    pub fn of(m: &LoopModule, k: &Kernel) -> Option<KernelShape> {
        let sums: Vec<&Compute> = k.computes().into_iter().filter(|c| c.write.kind.adds()).collect();
        let [sum] = sums[..] else { return None };
        let chain = Chain::of(&k.body);
        let (mut reduce, mut unroll) = (Vec::new(), Vec::new());
        let mut constant = true;
        for n in chain.rest(&k.body) {
            n.walk(&mut |n| {
                if let Node::For(f) = n {
                    let trip = f.hi.as_const().zip(f.lo.as_const()).map(|(h, l)| h - l);
                    constant &= trip.is_some();
                    match f.kind {
                        LoopKind::Reduce => reduce.push(trip.unwrap_or(0)),
                        LoopKind::Unroll => unroll.push(trip.unwrap_or(0)),
                        _ => {}
                    }
                }
            });
        }
        if !constant {
            return None;
        }
        Some(KernelShape {
            dtype: m.buffers[sum.write.buf].dtype.name().to_string(),
            chain: chain.loops.iter().map(|l| l.2).collect(),
            reduce,
            unroll,
            loads: sum.values.iter().filter(|v| matches!(v.op, VOp::Load { .. })).count(),
        })
    }

    /// How far `self` is from `other` when both have the same form: the
    /// sum over chain and reduce loops of |log2(a/b)|; `None` for another
    /// form, or when some loop differs by more than [`NEAR`] octaves (a
    /// recording says little about a kernel that much larger or smaller).
    pub fn distance(&self, other: &KernelShape) -> Option<f64> {
        let same_form = self.dtype == other.dtype
            && self.unroll == other.unroll
            && self.loads == other.loads
            && self.chain.len() == other.chain.len()
            && self.reduce.len() == other.reduce.len();
        if !same_form {
            return None;
        }
        let mut d = 0.0;
        for (a, b) in self.chain.iter().chain(&self.reduce).zip(other.chain.iter().chain(&other.reduce)) {
            let octaves = ((*a).max(1) as f64 / (*b).max(1) as f64).log2().abs();
            if octaves > NEAR {
                return None;
            }
            d += octaves;
        }
        Some(d)
    }
}

/// A recording applies to loops at most this many octaves (4x) away.
pub const NEAR: f64 = 2.0;

/// One recorded choice: what `pass` picked for a kernel of `shape` on the
/// table's architecture, and what the measurement was.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub pass: String,
    pub shape: KernelShape,
    pub choice: String,
    /// The benchmark op measured (`matmul_f32@4096x4096x4096`).
    pub op: String,
    /// The fastest variant's time, and each measured candidate's.
    pub ms: f64,
    #[serde(default)]
    pub others: std::collections::BTreeMap<String, f64>,
}

/// A tuning table: the recordings of one architecture.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Table {
    pub format: u32,
    pub sm: u32,
    /// The GPU and run the recordings came from (free text).
    pub device: String,
    pub measured: String,
    pub entries: Vec<Entry>,
}

/// The table format this compiler reads.
pub const FORMAT: u32 = 1;

impl Table {
    pub fn parse(text: &str) -> Result<Table, String> {
        let t: Table = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if t.format != FORMAT {
            return Err(format!("tuning table format {} (this compiler reads {FORMAT})", t.format));
        }
        Ok(t)
    }

    /// The compiled-in table of compute capability `sm`, if one was
    /// recorded.
    pub fn builtin(sm: u32) -> Option<&'static Table> {
        static SM90: OnceLock<Option<Table>> = OnceLock::new();
        match sm {
            // A table that does not parse is a bug of `import`, caught by
            // the test below; a compiler built with one tunes nothing.
            90 => SM90.get_or_init(|| Table::parse(include_str!("../../tuning/sm_90.json")).ok()).as_ref(),
            _ => None,
        }
    }

    /// The recording of `pass` nearest to `shape` (ties: the first).
    pub fn nearest(&self, pass: &str, shape: &KernelShape) -> Option<&Entry> {
        let mut best: Option<(&Entry, f64)> = None;
        for e in self.entries.iter().filter(|e| e.pass == pass) {
            if let Some(d) = shape.distance(&e.shape) {
                if best.is_none_or(|(_, b)| d < b) {
                    best = Some((e, d));
                }
            }
        }
        best.map(|(e, _)| e)
    }
}

/// What decides a pass's choice (the pass's options).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Choosing {
    /// `choice=DESC`: this candidate wherever a kernel has it.
    pub forced: Option<String>,
    /// Consult the table of this `sm` (`None`: `--no-tuning`).
    pub table_sm: Option<u32>,
}

/// Where a pass's choice came from (its `--stats` line says so).
#[derive(Clone, Debug, PartialEq)]
pub enum Source {
    Forced,
    /// The table's recording for this op.
    Table {
        sm: u32,
        op: String,
    },
    Heuristic,
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::Forced => write!(f, "forced"),
            Source::Table { sm, op } => write!(f, "sm_{sm} table, as {op}"),
            Source::Heuristic => write!(f, "heuristic"),
        }
    }
}

/// The index of the candidate `pass` applies to `k` among `described`
/// (the candidates' descriptions, the heuristic's best first), and why:
/// the forced choice if `k` has it, else the table's if `k` has it, else
/// the first. `None` when there is no candidate, or `none` was forced or
/// recorded.
pub fn pick(pass: &str, m: &LoopModule, k: &Kernel, described: &[String], how: &Choosing) -> Option<(usize, Source)> {
    pick_in(pass, m, k, described, how.forced.as_deref(), how.table_sm.and_then(Table::builtin))
}

/// [`pick`] with the forced choice and the table given (a pass's tests
/// consult a table of their own).
pub fn pick_in(pass: &str, m: &LoopModule, k: &Kernel, described: &[String], forced: Option<&str>, table: Option<&Table>) -> Option<(usize, Source)> {
    if described.is_empty() || forced == Some(NONE) {
        return None;
    }
    if let Some(i) = forced.and_then(|f| described.iter().position(|d| d == f)) {
        return Some((i, Source::Forced));
    }
    let recorded = table.and_then(|t| Some((t.sm, t.nearest(pass, &KernelShape::of(m, k)?)?)));
    if let Some((sm, e)) = recorded {
        // The recording found nothing worth applying.
        if e.choice == NONE {
            return None;
        }
        if let Some(i) = described.iter().position(|d| *d == e.choice) {
            return Some((i, Source::Table { sm, op: e.op.clone() }));
        }
    }
    Some((0, Source::Heuristic))
}

/// `choice=none`: the pass reshapes no kernel.
pub const NONE: &str = "none";

/// The `choice` option's declaration, the same for every tuned pass.
pub const CHOICE: (&str, &str) = ("choice", "DESC: apply this candidate (as --stats names it) wherever a kernel has it; `none`: no kernel");

/// Parses `choice=`: a description of no candidate of a kernel leaves
/// that kernel to the table and heuristic (another kernel of the module
/// may have it); `none` reshapes no kernel.
pub fn set_choice(how: &mut Choosing, value: &str) -> Result<(), String> {
    if value.is_empty() || value.chars().any(|c| c.is_whitespace() || c == ',' || c == '{' || c == '}') {
        return Err(format!("expected a candidate's description (as --stats names it), got `{value}`"));
    }
    how.forced = Some(value.to_string());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(chain: &[i64], reduce: &[i64], unroll: &[i64]) -> KernelShape {
        KernelShape { dtype: "f32".into(), chain: chain.to_vec(), reduce: reduce.to_vec(), unroll: unroll.to_vec(), loads: 2 }
    }

    #[test]
    fn the_builtin_tables_parse_and_name_their_architecture() {
        let t = Table::builtin(90).expect("compiler/tuning/sm_90.json parses");
        assert_eq!(t.sm, 90);
        for e in &t.entries {
            assert!(e.others.values().all(|&ms| ms >= e.ms), "{} {}: the recorded choice is the fastest", e.op, e.pass);
        }
        assert!(Table::builtin(75).is_none());
    }

    #[test]
    fn a_matmul_kernel_has_its_trips_and_two_loads() {
        let m = crate::passes::test_kernels::matmul(64, 32, 8);
        let s = KernelShape::of(&m, &m.kernels[0]).expect("a sum");
        assert_eq!(s, KernelShape { dtype: "i32".into(), chain: vec![64, 32], reduce: vec![8], unroll: vec![], loads: 2 });
    }

    #[test]
    fn nearest_takes_the_same_form_within_four_times_and_the_closest() {
        let e = |chain: &[i64], choice: &str| Entry {
            pass: "register-tiles".into(),
            shape: shape(chain, &[64], &[]),
            choice: choice.into(),
            op: choice.into(),
            ms: 1.0,
            others: Default::default(),
        };
        let t = Table { format: FORMAT, sm: 90, device: String::new(), measured: String::new(), entries: vec![e(&[1024, 1024], "a"), e(&[4096, 4096], "b")] };
        let got = |chain: &[i64], unroll: &[i64]| t.nearest("register-tiles", &shape(chain, &[64], unroll)).map(|e| e.choice.clone());
        assert_eq!(got(&[1024, 2048], &[]).as_deref(), Some("a"));
        assert_eq!(got(&[2048, 4096], &[]).as_deref(), Some("b"));
        assert_eq!(got(&[64, 64], &[]), None, "16x smaller: too far");
        assert_eq!(got(&[1024, 1024], &[2]), None, "another form");
        assert_eq!(t.nearest("block-tiles", &shape(&[1024, 1024], &[64], &[])), None, "another pass");
    }

    #[test]
    fn pick_prefers_forced_then_table_then_first() {
        let m = crate::passes::test_kernels::matmul(64, 64, 8);
        let k = m.kernels[0].clone();
        let d: Vec<String> = ["8x8@0", "4x4@0"].iter().map(|s| s.to_string()).collect();
        let forced = Choosing { forced: Some("4x4@0".into()), table_sm: None };
        assert_eq!(pick("register-tiles", &m, &k, &d, &forced), Some((1, Source::Forced)));
        let absent = Choosing { forced: Some("2x2@0".into()), table_sm: None };
        assert_eq!(pick("register-tiles", &m, &k, &d, &absent), Some((0, Source::Heuristic)));
        assert_eq!(pick("register-tiles", &m, &k, &[], &Choosing::default()), None);
        let mut how = Choosing::default();
        assert!(set_choice(&mut how, "8x8 @0").is_err());
        assert!(set_choice(&mut how, "none").is_ok());
        assert_eq!(pick("register-tiles", &m, &k, &d, &how), None);
    }
}
