//! The abstract syntax tree of a `.et` file: exactly what was written, every
//! node with its byte span. Semantic meaning is assigned later (compiler
//! crate, `sema`); nothing here knows about ranks or dims.

use crate::span::Span;

#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    pub name: String,
    pub span: Span,
}

/// A whole file, its sections in the order docs/language.md section 2 fixes.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct File {
    pub program: Vec<Stmt>,
    pub call: Option<Call>,
    pub outputs: Option<Outputs>,
    pub constraints: Vec<Constraint>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AssignOp {
    /// `=`: reset each reached cell once, then accumulate.
    Assign,
    /// `+=`: accumulate without reset.
    AddAssign,
    /// `max=`: the first value to reach a cell sets it, each later one
    /// keeps the larger (docs/language.md s.3).
    MaxAssign,
    /// `min=`: as `max=`, keeping the smaller.
    MinAssign,
}

impl AssignOp {
    pub fn text(self) -> &'static str {
        match self {
            AssignOp::Assign => "=",
            AssignOp::AddAssign => "+=",
            AssignOp::MaxAssign => "max=",
            AssignOp::MinAssign => "min=",
        }
    }

    /// Does the statement reset each reached cell before combining into it
    /// (`=`, `max=`, `min=`), rather than add to what is there (`+=`)?
    pub fn resets(self) -> bool {
        !matches!(self, AssignOp::AddAssign)
    }
}

/// The elementwise functions of right-hand sides (docs/language.md s.3,
/// "Functions and comparisons"). Names are reserved only before `(`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Func {
    Exp,
    Log,
    Sqrt,
    Tanh,
    Abs,
    Max,
    Min,
    Pow,
    /// `select(c, a, b)`: `a` where `c != 0`, else `b`.
    Select,
}

impl Func {
    pub const ALL: [Func; 9] = [Func::Exp, Func::Log, Func::Sqrt, Func::Tanh, Func::Abs, Func::Max, Func::Min, Func::Pow, Func::Select];

    pub fn name(self) -> &'static str {
        match self {
            Func::Exp => "exp",
            Func::Log => "log",
            Func::Sqrt => "sqrt",
            Func::Tanh => "tanh",
            Func::Abs => "abs",
            Func::Max => "max",
            Func::Min => "min",
            Func::Pow => "pow",
            Func::Select => "select",
        }
    }

    pub fn from_name(name: &str) -> Option<Func> {
        Func::ALL.into_iter().find(|f| f.name() == name)
    }

    /// How many arguments it takes.
    pub fn arity(self) -> usize {
        match self {
            Func::Exp | Func::Log | Func::Sqrt | Func::Tanh | Func::Abs => 1,
            Func::Max | Func::Min | Func::Pow => 2,
            Func::Select => 3,
        }
    }

    /// Is the result FLOAT whatever the arguments (`exp log sqrt tanh
    /// pow`), rather than the join of the arguments' types (`abs max min`,
    /// and `select`'s two values)?
    pub fn always_float(self) -> bool {
        matches!(self, Func::Exp | Func::Log | Func::Sqrt | Func::Tanh | Func::Pow)
    }

    /// Every name, for "the functions are ..." messages.
    pub fn names() -> String {
        Func::ALL.iter().map(|f| format!("`{}`", f.name())).collect::<Vec<_>>().join(", ")
    }
}

/// Comparisons of right-hand sides: INT 1 when they hold, else 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl CmpOp {
    pub const ALL: [CmpOp; 6] = [CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge, CmpOp::Eq, CmpOp::Ne];

    pub fn text(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
        }
    }

    /// The IR spelling (`lt`, `le`, ..).
    pub fn name(self) -> &'static str {
        match self {
            CmpOp::Lt => "lt",
            CmpOp::Le => "le",
            CmpOp::Gt => "gt",
            CmpOp::Ge => "ge",
            CmpOp::Eq => "eq",
            CmpOp::Ne => "ne",
        }
    }

    /// Does it hold for `a` and `b`? IEEE: every comparison with a NaN is
    /// false except `!=`.
    pub fn holds<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            CmpOp::Lt => a < b,
            CmpOp::Le => a <= b,
            CmpOp::Gt => a > b,
            CmpOp::Ge => a >= b,
            CmpOp::Eq => a == b,
            CmpOp::Ne => a != b,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    pub lhs: Access,
    pub op: AssignOp,
    pub rhs: Expr,
    pub span: Span,
}

/// `name[arg, ...]`: an array read or write.
#[derive(Clone, Debug, PartialEq)]
pub struct Access {
    pub array: Ident,
    pub indices: Vec<IndexArg>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum IndexArg {
    Expr(Expr),
    /// `:` — the slot whose stored vector is used as an index tuple.
    Slice(Span),
}

impl IndexArg {
    pub fn span(&self) -> Span {
        match self {
            IndexArg::Expr(e) => e.span,
            IndexArg::Slice(s) => *s,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    /// `/`: true division (FLOAT result).
    Div,
    /// `//`: floor division.
    FloorDiv,
    /// `//^`: ceiling division.
    CeilDiv,
    /// `%`: floor modulo.
    Mod,
}

impl BinOp {
    pub fn text(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::FloorDiv => "//",
            BinOp::CeilDiv => "//^",
            BinOp::Mod => "%",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElemType {
    Int,
    Float,
}

impl ElemType {
    pub fn text(self) -> &'static str {
        match self {
            ElemType::Int => "INT",
            ElemType::Float => "FLOAT",
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

/// One entry of a `DIMS(..)` list: an eintup (its dims), or a
/// non-negative integer literal `n`, which contributes the one component
/// `n + 1` (docs/language.md s.4 and s.5), as in the original tool's
/// `strides=DIMS(0,stride,0)`.
#[derive(Clone, Debug, PartialEq)]
pub enum DimsArg {
    Name(Ident),
    Lit(i64, Span),
}

impl DimsArg {
    pub fn span(&self) -> Span {
        match self {
            DimsArg::Name(i) => i.span,
            DimsArg::Lit(_, s) => *s,
        }
    }
}

/// One expression grammar serves index expressions, right-hand sides and
/// constraint expressions; which forms are legal where is decided by `sema`
/// (so the user gets "not allowed in an index" rather than a parse error).
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    Int(i64),
    Float(f64),
    /// An eintup used as a value (index position) — or a misplaced name.
    Name(Ident),
    /// `DIMS(a, b, ...)`: concatenated dims, a static tuple.
    Dims(Vec<DimsArg>),
    /// `DIMS(a, ...)[t]`: component `t` of a static vector (right-hand side).
    DimsAt(Vec<DimsArg>, Box<Expr>),
    /// `RANK(a, b, ...)`: sum of ranks, a static scalar.
    Rank(Vec<Ident>),
    /// `FLAT(e1, ..., ek)`: row-major position inside `DIMS(e1, ..., ek)`.
    Flat(Vec<Expr>),
    Access(Access),
    Random {
        lo: Box<Expr>,
        hi: Box<Expr>,
        ty: ElemType,
        ty_span: Span,
    },
    Neg(Box<Expr>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `a < b` and the other comparisons (right-hand sides only).
    Compare(CmpOp, Box<Expr>, Box<Expr>),
    /// `exp(e)`, `max(a, b)`, `select(c, a, b)`, .. (right-hand sides
    /// only); the argument count is checked by the parser.
    Call(Func, Vec<Expr>),
}

/// `tf.nn.convolution(input=x, strides=DIMS(stride), padding=L('SAME'))`.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// Dotted function name, e.g. `["tf", "nn", "convolution"]`.
    pub func: Vec<Ident>,
    pub args: Vec<CallArg>,
    pub span: Span,
}

impl Call {
    pub fn func_name(&self) -> String {
        self.func.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(".")
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct CallArg {
    pub keyword: Option<Ident>,
    pub value: CallValue,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq)]
pub enum CallValue {
    /// An array of the program, passed by name.
    Array(Ident),
    /// `DIMS(..)`: a list of ints.
    Dims(Vec<DimsArg>),
    /// `RANK(..)`: an int.
    Rank(Vec<Ident>),
    /// `L(literal)`, or a bare literal.
    Literal(Literal),
    /// `TENSOR(DIMS(..))`: a constant int tensor.
    Tensor(Vec<DimsArg>),
}

#[derive(Clone, Debug, PartialEq)]
pub enum Literal {
    Str(String),
    Int(i64),
    Float(f64),
    /// A bare word such as `True`, `False` or `None`.
    Word(String),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Outputs {
    pub names: Vec<Ident>,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConstraintSubject {
    Rank,
    Dims,
}

#[derive(Clone, Debug, PartialEq)]
pub enum ConstraintRel {
    /// `IN [lo, hi]`, inclusive.
    In { lo: i64, hi: i64, span: Span },
    /// `= expr`.
    Eq(Expr),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Constraint {
    pub subject: ConstraintSubject,
    pub target: Ident,
    pub rel: ConstraintRel,
    pub span: Span,
}
