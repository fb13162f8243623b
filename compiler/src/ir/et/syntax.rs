//! The words of the `et` dialect's text: its keywords, and the spelling of
//! every enum it writes as a word or an operator. `print` and `parse` both
//! take them from here (docs/ir-et.md).

use super::IndexOp;
use crate::ir::text::{spelled, Spelled};
use et_grammar::ast::{AssignOp, BinOp, CmpOp, ElemType, Func};

/// Line keywords, in the order their sections come. A dynamic module
/// (docs/ir-et.md, "Dynamic modules") starts with its `symbols(..)` and
/// has `check` lines after its eintups.
pub const SYMBOLS: &str = "symbols";
pub const EINTUP: &str = "eintup";
pub const CHECK: &str = "check";
pub const ARRAY: &str = "array";
pub const STMT: &str = "stmt";
pub const CALL: &str = "call";
pub const OUTPUTS: &str = "outputs";

/// Array flags: `def=N`, `input`, `range=[lo, hi)`.
pub const DEF: &str = "def";
pub const INPUT: &str = "input";
pub const RANGE: &str = "range";

/// What a `check` line is about: `about NAME`.
pub const ABOUT: &str = "about";

/// A statement's variables: `vars(a, b)`.
pub const VARS: &str = "vars";

/// Functions of index expressions and call arguments, as in the `.et`
/// language, and the call-argument wrappers `TENSOR(DIMS(..))`, `L(..)`.
pub const DIMS: &str = "DIMS";
pub const RANK: &str = "RANK";
pub const FLAT: &str = "FLAT";
pub const TENSOR: &str = "TENSOR";
pub const LITERAL: &str = "L";

/// The op word of every op that is not binary; a binary op is written as
/// its `BinOp`'s spelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpName {
    Const,
    Rank,
    DimsAt,
    Read,
    Random,
    Neg,
}

spelled!(OpName { Const => "const", Rank => "rank", DimsAt => "dims_at", Read => "read", Random => "random", Neg => "neg" });

spelled!(BinOp { Add => "add", Sub => "sub", Mul => "mul", Div => "div", FloorDiv => "floordiv", CeilDiv => "ceildiv", Mod => "mod" });

spelled!(CmpOp { Lt => "lt", Le => "le", Gt => "gt", Ge => "ge", Eq => "eq", Ne => "ne" });

/// Functions are written with their `.et` names (`exp %0`, `max %0, %1`).
impl Spelled for Func {
    const ALL: &'static [Self] = &Func::ALL;
    fn spelling(self) -> &'static str {
        self.name()
    }
}

spelled!(IndexOp { Add => "+", Sub => "-", Mul => "*", FloorDiv => "//", CeilDiv => "//^", Mod => "%" });

/// Element types and assignments are written as in the `.et` language.
impl Spelled for ElemType {
    const ALL: &'static [Self] = &[ElemType::Int, ElemType::Float];
    fn spelling(self) -> &'static str {
        self.text()
    }
}

/// The one-token assignments; `max=` and `min=` are a word and `=` in the
/// IR's tokens ([`REDUCTIONS`]), read as a pair.
impl Spelled for AssignOp {
    const ALL: &'static [Self] = &[AssignOp::Assign, AssignOp::AddAssign];
    fn spelling(self) -> &'static str {
        self.text()
    }
}

/// `max=` / `min=`: the word before the `=`.
pub const REDUCTIONS: [(AssignOp, &str); 2] = [(AssignOp::MaxAssign, "max"), (AssignOp::MinAssign, "min")];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::text::spelling::checks;
    use crate::ir::text::{lex_line, Dialect, Tok};

    static D: Dialect = Dialect { name: "et", end: "end of line", bad_char: "C", bad_number: "N", bad_string: "S", unexpected: "U" };

    #[test]
    fn every_spelling_is_one_token_and_reads_back() {
        checks::table::<OpName>(&D);
        checks::table::<BinOp>(&D);
        checks::table::<IndexOp>(&D);
        checks::table::<ElemType>(&D);
        checks::table::<AssignOp>(&D);
        checks::table::<CmpOp>(&D);
        checks::table::<Func>(&D);
        for w in [EINTUP, ARRAY, STMT, CALL, OUTPUTS, DEF, INPUT, RANGE, VARS, DIMS, RANK, FLAT, TENSOR, LITERAL] {
            checks::one_token(w, &D);
            assert!(!matches!(lex_line(w, 0, &D).0[0].tok, Tok::Punct(_)), "{w} is a word");
        }
        // Op words and binary op words do not overlap: the parser tries both.
        let words: Vec<&str> = OpName::ALL
            .iter()
            .map(|o| o.spelling())
            .chain(BinOp::ALL.iter().map(|o| o.spelling()))
            .chain(CmpOp::ALL.iter().map(|o| o.spelling()))
            .chain(Func::ALL.iter().map(|o| o.spelling()))
            .collect();
        assert!(words.iter().enumerate().all(|(i, w)| !words[i + 1..].contains(w)), "{words:?}");
    }
}
