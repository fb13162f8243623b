//! Which framework calls a `.et` file may name.
//!
//! `check` runs the call written in a file, and files are shared, so the
//! call must be as harmless as reading the file: a pure tensor operation of
//! TensorFlow's public op API, never a way into Python, files or processes.
//! This is the first of two independent gates (docs/check.md): it refuses a
//! name before any Python starts, with the call's location. The bridge
//! (`scripts/framework_call.py`) applies the same rules again and then checks
//! what the name resolves to.
//!
//! The rules come from `scripts/framework_policy.json`, which the bridge
//! reads too, so the two gates cannot drift apart. A name is accepted when
//! - it has at most `max_name_chars` characters;
//! - every dotted part is lower-case ASCII: a letter, then letters, digits
//!   and `_` (no private or dunder names, no classes or capitalised raw ops,
//!   no Unicode look-alikes);
//! - it starts with `tf`, and everything before the last part is one of the
//!   allowed `namespaces`;
//! - no part after that namespace is on the `denied` list (each entry says
//!   why). The namespace's own parts are exempt: a listed namespace was
//!   reviewed as a whole, so `experimental` is refused in
//!   `tf.experimental.dlpack.from_dlpack` but not in
//!   `tf.experimental.numpy.kron`, while `tf.experimental.numpy.random.rand`
//!   is still refused for `random`.

use serde::Deserialize;
use std::fmt;
use std::sync::OnceLock;

/// The policy file, compiled in so `eintup` needs nothing at run time.
const POLICY_JSON: &str = include_str!("../../../scripts/framework_policy.json");

#[derive(Debug, Deserialize)]
struct Policy {
    max_name_chars: usize,
    namespaces: Vec<String>,
    denied: Vec<DeniedGroup>,
}

#[derive(Debug, Deserialize)]
struct DeniedGroup {
    reason: String,
    names: Vec<String>,
}

fn policy() -> &'static Policy {
    static POLICY: OnceLock<Policy> = OnceLock::new();
    // The file is part of the source tree; a unit test parses it, so a
    // malformed file fails `cargo test` rather than a user's `check`.
    POLICY.get_or_init(|| serde_json::from_str(POLICY_JSON).expect("scripts/framework_policy.json is valid"))
}

/// Why a name or keyword is refused: one sentence, printed as the label of
/// the E0503 diagnostic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal(pub String);

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The namespaces a call may use, for messages and docs (`tf`, `tf.math`, ...).
pub fn allowed_namespaces() -> &'static [String] {
    &policy().namespaces
}

/// Accepts `name` (such as `tf.nn.convolution`) or says why not.
pub fn vet_function(name: &str) -> Result<(), Refusal> {
    let p = policy();
    let chars = name.chars().count();
    if chars > p.max_name_chars {
        return Err(Refusal(format!("the name has {chars} characters; at most {} are allowed", p.max_name_chars)));
    }
    let parts: Vec<&str> = name.split('.').collect();
    for part in &parts {
        check_part(part, "name")?;
    }
    if parts[0] != "tf" || parts.len() < 2 {
        return Err(Refusal("only TensorFlow operations (`tf.` names) can be called".into()));
    }
    // A denied part explains more than "not an allowed namespace" (`tf.io`
    // is refused because it does file I/O); the gravest reason wins, and
    // the groups are listed gravest first.
    let grave = parts[reviewed_parts(&parts[..parts.len() - 1])..]
        .iter()
        .filter_map(|part| denial(part).map(|(rank, why)| (rank, *part, why)))
        .min_by_key(|(rank, _, _)| *rank);
    if let Some((_, part, why)) = grave {
        return Err(Refusal(format!("`{part}` {why}")));
    }
    let namespace = parts[..parts.len() - 1].join(".");
    if !p.namespaces.contains(&namespace) {
        return Err(Refusal(format!("`{namespace}` is not one of the allowed namespaces ({})", p.namespaces.join(", "))));
    }
    Ok(())
}

/// How many leading parts of `namespace` form the longest allowed
/// namespace (at least 1, `tf`): those parts are exempt from the deny list.
fn reviewed_parts(namespace: &[&str]) -> usize {
    let allowed = &policy().namespaces;
    (1..=namespace.len()).rev().find(|&k| allowed.contains(&namespace[..k].join("."))).unwrap_or(1)
}

/// Accepts a keyword argument's name or says why not. Keywords only name
/// parameters, but a private or non-ASCII one has no honest use.
pub fn vet_keyword(keyword: &str) -> Result<(), Refusal> {
    if keyword.is_empty() || keyword.len() > policy().max_name_chars {
        return Err(Refusal(format!("a keyword must have 1 to {} characters", policy().max_name_chars)));
    }
    if let Some(c) = keyword.chars().find(|c| !c.is_ascii()) {
        return Err(Refusal(non_ascii(c)));
    }
    if keyword.starts_with('_') {
        return Err(Refusal("private and special (`_`, `__x__`) keywords are refused".into()));
    }
    Ok(())
}

/// One dotted part of a function name.
fn check_part(part: &str, what: &str) -> Result<(), Refusal> {
    if let Some(c) = part.chars().find(|c| !c.is_ascii()) {
        return Err(Refusal(non_ascii(c)));
    }
    match part.bytes().next() {
        None => Err(Refusal(format!("the {what} has an empty part"))),
        Some(b'_') => Err(Refusal(format!("`{part}` is private or special (`_`, `__x__`); such names are refused"))),
        Some(b) if b.is_ascii_uppercase() || part.bytes().any(|b| b.is_ascii_uppercase()) => {
            Err(Refusal(format!("`{part}` has capitals: classes and raw ops are refused, only lower-case operations")))
        }
        Some(b) if !b.is_ascii_lowercase() => Err(Refusal(format!("`{part}` must start with a letter"))),
        Some(_) if !part.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_') => {
            Err(Refusal(format!("`{part}` may hold only letters, digits and `_`")))
        }
        Some(_) => Ok(()),
    }
}

fn non_ascii(c: char) -> String {
    format!("the character {c:?} (U+{:04X}) is not ASCII; names must be plain ASCII, so look-alikes cannot pass", c as u32)
}

/// The group index (0 = gravest) and reason when `part` is denied.
fn denial(part: &str) -> Option<(usize, &'static str)> {
    policy().denied.iter().enumerate().find(|(_, g)| g.names.iter().any(|n| n == part)).map(|(k, g)| (k, g.reason.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(name: &str) -> String {
        match vet_function(name) {
            Err(Refusal(why)) => why,
            Ok(()) => panic!("`{name}` was accepted"),
        }
    }

    #[test]
    fn the_policy_file_parses_and_is_consistent() {
        let p = policy();
        assert!(p.namespaces.iter().all(|ns| ns == "tf" || ns.starts_with("tf.")));
        for g in &p.denied {
            assert!(!g.reason.is_empty() && !g.names.is_empty());
            for n in &g.names {
                // a denied name that is an allowed namespace would lock it out
                assert!(!p.namespaces.iter().any(|ns| ns.rsplit('.').next() == Some(n)), "{n} is both denied and allowed");
            }
        }
    }

    #[test]
    fn the_shipped_calls_are_accepted() {
        for name in [
            "tf.nn.bias_add",
            "tf.nn.convolution",
            "tf.nn.conv_transpose",
            "tf.reshape",
            "tf.gather_nd",
            "tf.linalg.matmul",
            "tf.meshgrid",
            "tf.math.reduce_sum",
            "tf.scatter_nd",
            "tf.slice",
            "tf.nn.space_to_depth",
            "tf.tile",
            "tf.signal.fft2d",
            "tf.bitwise.bitwise_and",
            "tf.image.rot90",
            "tf.experimental.numpy.kron",
            "tf.experimental.numpy.einsum",
        ] {
            assert_eq!(vet_function(name), Ok(()), "{name}");
        }
    }

    #[test]
    fn the_attacks_of_issue_14_are_refused() {
        assert!(refused("tf.dtensor.python.config.os.system").contains("`python` reaches Python itself"));
        assert!(refused("tf.compat.v1.test.mock.builtins.exec").contains("reaches Python itself"));
        assert!(refused("tf.io.write_file").contains("`io` reads or writes files"));
        assert!(refused("tf.io.gfile.rmtree").contains("reads or writes files"));
        assert!(refused("tf.load_library").contains("loads code"));
        assert!(refused("tf.load_op_library").contains("loads code"));
    }

    #[test]
    fn side_effects_and_escape_hatches_are_refused() {
        for (name, why) in [
            ("tf.py_function", "runs Python code"),
            ("tf.numpy_function", "runs Python code"),
            ("tf.function", "runs Python code"),
            ("tf.map_fn", "callable"),
            ("tf.print", "files, logs"),
            ("tf.summary.write", "files, logs"),
            ("tf.saved_model.load", "loads code"),
            ("tf.compat.v1.app.run", "not a pure tensor operation"),
            ("tf.test.main", "not a pure tensor operation"),
            ("tf.config.run_functions_eagerly", "hidden state"),
            ("tf.data.Dataset", "capitals"),
            ("tf.distribute.get_strategy", "not a pure tensor operation"),
            ("tf.debugging.experimental.enable_dump_debug_info", "not a pure tensor operation"),
            ("tf.raw_ops.write_file", "reads or writes files"),
            ("tf.raw_ops.matmul", "not a pure tensor operation"),
            ("tf.random.set_seed", "hidden state"),
            ("tf.nn.dropout", "hidden state"),
            ("tf.image.decode_png", "image codec"),
            ("tf.strings.format", "not a pure tensor operation"),
            ("tf.experimental.register_filesystem_plugin", "not a pure tensor operation"),
            ("tf.experimental.dlpack.from_dlpack", "not a pure tensor operation"),
            ("tf.experimental.numpy.random.rand", "hidden state"),
            ("tf.experimental.numpy.random.seed", "hidden state"),
            ("tf.experimental.numpy.experimental_enable_numpy_behavior", "hidden state"),
            ("tf.experimental.numpy.experimental.numpy.kron", "not a pure tensor operation"),
            ("tf.nn.experimental.numpy.kron", "not a pure tensor operation"),
        ] {
            let got = refused(name);
            assert!(got.contains(why), "{name}: {got}");
        }
    }

    #[test]
    fn names_outside_the_allowed_namespaces_are_refused() {
        assert!(refused("tf.nn.experimental.stateless_dropout").contains("not a pure tensor operation"));
        assert!(refused("tf.math.special.bessel_j0").contains("`tf.math.special` is not one of the allowed namespaces"));
        assert!(refused("tf.linalg.matmul.something").contains("`tf.linalg.matmul` is not one of"));
        assert!(refused("os.system").contains("only TensorFlow operations"));
        assert!(refused("np.matmul").contains("only TensorFlow operations"));
        assert!(refused("tf").contains("only TensorFlow operations"));
        assert!(refused("torch.matmul").contains("only TensorFlow operations"));
    }

    #[test]
    fn private_dunder_and_capitalised_parts_are_refused() {
        assert!(refused("tf.__builtins__.exec").contains("private or special"));
        assert!(refused("tf.math.__class__").contains("private or special"));
        assert!(refused("tf._api.v2.io.write_file").contains("private or special"));
        assert!(refused("tf.nn.__init__.__globals__").contains("private or special"));
        assert!(refused("tf.Variable").contains("capitals"));
        assert!(refused("tf.linalg.LinearOperator").contains("capitals"));
        assert!(refused("tf.raw_ops.WriteFile").contains("capitals"));
        assert!(refused("tf.nn..relu").contains("empty part"));
        assert!(refused("tf.nn.2d").contains("start with a letter"));
        assert!(refused("tf.nn.re-lu").contains("only letters, digits"));
    }

    #[test]
    fn unicode_look_alikes_are_refused() {
        // Cyrillic о, fullwidth ｏ, dotless ı: all would look like `tf.io`,
        // and Python's NFKC normalisation would turn some into ASCII.
        for name in ["tf.i\u{043e}.write_file", "tf.i\u{ff4f}.write_file", "tf.nn.rel\u{0131}", "t\u{0192}.nn.relu", "tf.nn.relu\u{200b}"] {
            assert!(refused(name).contains("is not ASCII"), "{name}");
        }
    }

    #[test]
    fn overlong_names_are_refused() {
        let long = format!("tf.{}", "a".repeat(200));
        assert!(refused(&long).contains("at most 128"));
        let deep = format!("tf{}", ".nn".repeat(100));
        assert!(refused(&deep).contains("characters"));
        // the limit counts characters, not bytes, and is inclusive
        let edge = format!("tf.{}", "a".repeat(125));
        assert_eq!(vet_function(&edge), Ok(()));
    }

    #[test]
    fn keywords_must_be_plain() {
        assert_eq!(vet_keyword("batch_dims"), Ok(()));
        assert_eq!(vet_keyword("T"), Ok(()));
        assert!(vet_keyword("__class__").is_err());
        assert!(vet_keyword("_x").is_err());
        assert!(vet_keyword("p\u{0430}dding").unwrap_err().0.contains("not ASCII"));
        assert!(vet_keyword(&"k".repeat(129)).is_err());
    }
}
