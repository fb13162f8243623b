//! The textual pass pipeline of `etopt --passes`, written as `mlir-opt`
//! writes one: pass names separated by commas, each with optional options
//! in braces, `resolve,infer-ranks,specialize{seed=3 bind=a=[2,3]}`.
//! Inside the braces, options are `key=value`, separated by blanks or
//! commas; a value may hold brackets (`[2, 3]`), whose commas and blanks
//! belong to it. A pass's options override the driver's (`--seed`,
//! `--bind`, `--float`) for that pass alone.
//!
//! Each pass that takes options declares its own typed struct next to the
//! pass, implementing [`PassOptions`]: the keys it accepts, how it starts
//! from the driver's settings ([`DriverOptions`]) and how a `key=value`
//! sets a field. The manager builds it ([`build`]) for each run of the
//! pass; a key the pass does not declare is an error naming the keys it
//! does (docs/passes.md, "Pass options").

use super::DriverOptions;
use crate::ir::loops::{FloatWidth, FpContract};

/// One pass of a pipeline as written: its name and its options in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassSpec {
    pub name: String,
    pub options: Vec<(String, String)>,
}

/// A pass's typed options: declared by the pass, built by the manager
/// from the driver's settings and the pass's `{key=value}` items.
pub trait PassOptions: Sized {
    /// The keys the pass accepts, each with its value's form and what it
    /// sets (shown by `--list-passes`). Keys shared by several passes use
    /// the declarations below ([`SEED`], [`FLOAT`], ...) so they read the
    /// same everywhere.
    const KEYS: &'static [(&'static str, &'static str)];
    /// The options before any `{key=value}`: what the driver says.
    fn from_driver(d: &DriverOptions) -> Self;
    /// Sets `key` (one of [`KEYS`](Self::KEYS)) from `value`; the error
    /// says what value was expected.
    fn set(&mut self, key: &str, value: &str) -> Result<(), String>;
}

/// The options of a pass that takes none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoOptions;

impl PassOptions for NoOptions {
    const KEYS: &'static [(&'static str, &'static str)] = &[];
    fn from_driver(_: &DriverOptions) -> Self {
        NoOptions
    }
    fn set(&mut self, key: &str, _: &str) -> Result<(), String> {
        Err(format!("option `{key}` is not declared"))
    }
}

/// `seed=N`, as `--seed`.
pub const SEED: (&str, &str) = ("seed", "N: the seed of drawn dims (as --seed)");
/// `bind=NAME=[..]`, as `--bind`.
pub const BIND: (&str, &str) = ("bind", "NAME=[d1,..]: fix an eintup's dims, repeatable (as --bind)");
/// `dynamic=true|false`, as `build --dynamic`.
pub const DYNAMIC: (&str, &str) = ("dynamic", "true|false: fix ranks only, leaving unbound dims symbolic (as build --dynamic)");
/// `rank=NAME=R`, as `--rank`.
pub const RANK: (&str, &str) = ("rank", "NAME=R: fix an eintup's rank in a dynamic build, repeatable (as --rank)");
/// `float=f64|f32`, as `--float`.
pub const FLOAT: (&str, &str) = ("float", "f64|f32: the width of FLOAT (as --float)");
/// `fp-contract=off|fast`, as `--fp-contract`.
pub const FP_CONTRACT: (&str, &str) = ("fp-contract", "off|fast: the GPU float policy (as --fp-contract)");

pub fn parse_seed(v: &str) -> Result<u64, String> {
    v.parse().map_err(|_| "expected a non-negative integer".to_string())
}

pub fn parse_float(v: &str) -> Result<FloatWidth, String> {
    v.parse().map_err(|_| "expected f64 or f32".to_string())
}

pub fn parse_fp_contract(v: &str) -> Result<FpContract, String> {
    v.parse::<FpContract>().map_err(|e| e.to_string())
}

/// Adds `bind=v` to `binds`: it replaces the binding of the same eintup.
/// `NAME=R` (`--rank`, the `rank` option).
pub fn parse_rank(v: &str) -> Result<(String, usize), String> {
    let parsed = v.split_once('=').and_then(|(n, r)| Some((n.trim(), r.trim().parse::<usize>().ok()?)));
    match parsed {
        Some((n, r)) if !n.is_empty() && r <= crate::ir::et::MAX_RANK => Ok((n.to_string(), r)),
        _ => Err(format!("`{v}`: expected NAME=R with 0 <= R <= {}", crate::ir::et::MAX_RANK)),
    }
}

pub fn parse_bool(v: &str) -> Result<bool, String> {
    v.parse().map_err(|_| "expected true or false".to_string())
}

pub fn add_binding(binds: &mut Vec<String>, v: &str) -> Result<(), String> {
    let b = crate::sema::parse_binding(v).map_err(|e| e.to_string())?;
    binds.retain(|d| crate::sema::parse_binding(d).map_or(true, |d| d.name != b.name));
    binds.push(v.to_string());
    Ok(())
}

/// A pass's options: the driver's, with the pass's `options` applied in
/// order. A key the pass does not declare, or a malformed value, is an
/// error naming both.
pub fn build<O: PassOptions>(pass: &str, options: &[(String, String)], driver: &DriverOptions) -> Result<O, String> {
    let mut o = O::from_driver(driver);
    for (k, v) in options {
        if !O::KEYS.iter().any(|(key, _)| key == k) {
            let keys: Vec<&str> = O::KEYS.iter().map(|(key, _)| *key).collect();
            let known = if keys.is_empty() { "it takes none".to_string() } else { format!("it takes {}", keys.join(", ")) };
            return Err(format!("pass `{pass}` has no option `{k}` ({known})"));
        }
        o.set(k, v).map_err(|e| format!("pass `{pass}`: option `{k}={v}`: {e}"))?;
    }
    Ok(o)
}

/// Cuts a pipeline at the commas outside braces and brackets.
pub fn split_pipeline(text: &str) -> Result<Vec<String>, String> {
    if let Some(hint) = nested_pipeline_hint(text) {
        return Err(hint);
    }
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth: i32 = 0;
    for ch in text.chars() {
        match ch {
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth -= 1;
                if depth < 0 {
                    return Err(format!("unbalanced `{ch}` in `{text}`"));
                }
            }
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    if depth != 0 {
        return Err(format!("unclosed `{{` or `[` in `{text}`"));
    }
    out.push(cur);
    let out: Vec<String> = out.into_iter().map(|s| s.trim().to_string()).collect();
    if out.iter().any(String::is_empty) {
        return Err(format!("an empty pass name in `{text}`"));
    }
    Ok(out)
}

/// `mlir-opt`'s nested form, `builtin.module(func.func(a),b{k=v})`: our
/// pipelines are flat (every pass runs on the whole module), so the error
/// says so and spells the flat pipeline, its anchors dropped. `None` when
/// no parenthesis stands outside braces and brackets.
fn nested_pipeline_hint(text: &str) -> Option<String> {
    let mut passes = Vec::new();
    let mut cur = String::new();
    let mut depth = 0;
    let mut nested = false;
    for ch in text.chars() {
        match ch {
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            // An anchor's name is not a pass: `(` drops it, `)` ends a pass.
            '(' if depth == 0 => {
                nested = true;
                cur.clear();
                continue;
            }
            ')' | ',' if depth == 0 => {
                passes.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    if !nested {
        return None;
    }
    passes.push(cur);
    let flat: Vec<&str> = passes.iter().map(|p| p.trim()).filter(|p| !p.is_empty()).collect();
    let write =
        if flat.is_empty() { "`--pipeline default`, or the passes separated by commas".to_string() } else { format!("`--passes '{}'`", flat.join(",")) };
    Some(format!(
        "`{text}` is mlir-opt's nested pipeline syntax; etopt's pipeline is flat, with no `builtin.module(..)` or other anchor (every pass runs on the whole module): write {write}, each pass with its options in braces (`specialize{{seed=3}}`; `etopt --list-passes` lists them)"
    ))
}

/// `name` or `name{key=value ...}`.
pub fn parse_spec(text: &str) -> Result<PassSpec, String> {
    let Some(open) = text.find('{') else { return Ok(PassSpec { name: text.trim().to_string(), options: Vec::new() }) };
    let name = text[..open].trim().to_string();
    let Some(body) = text[open + 1..].strip_suffix('}') else {
        return Err(format!("`{text}`: the options of a pass end with `}}` and nothing follows them"));
    };
    let mut options: Vec<(String, String)> = Vec::new();
    for (item, after_comma) in split_options(body) {
        // A bare word right after a comma continues a list value:
        // `differentiate{wrt=x,w of=y}` gives `wrt` the value `x,w`.
        if !item.contains('=') && after_comma {
            if let Some((_, v)) = options.last_mut() {
                v.push(',');
                v.push_str(&item);
                continue;
            }
        }
        let Some((k, v)) = item.split_once('=') else {
            return Err(format!("`{text}`: option `{item}` is not of the form key=value"));
        };
        options.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok(PassSpec { name, options })
}

/// The `key=value` items of a brace body: cut at blanks and commas outside
/// brackets; each with whether a comma (and nothing but blanks) came
/// right before it.
fn split_options(body: &str) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0;
    let mut comma = false;
    for ch in body.chars() {
        match ch {
            '[' | '{' => depth += 1,
            ']' | '}' => depth -= 1,
            c if depth == 0 && (c == ',' || c.is_whitespace()) => {
                if !cur.is_empty() {
                    out.push((std::mem::take(&mut cur), comma));
                    comma = false;
                }
                comma |= c == ',';
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    if !cur.is_empty() {
        out.push((cur, comma));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::loops::FloatWidth;

    #[test]
    fn pipelines_split_outside_braces_and_brackets() {
        assert_eq!(
            split_pipeline("resolve, infer-ranks,specialize{bind=a=[2,3] seed=1}").unwrap(),
            vec!["resolve", "infer-ranks", "specialize{bind=a=[2,3] seed=1}"]
        );
        assert!(split_pipeline("specialize{seed=1").is_err());
        assert!(split_pipeline("a}").is_err());
        assert!(split_pipeline("a,,b").is_err());
    }

    #[test]
    fn mlir_nested_pipelines_get_the_flat_form() {
        let e = split_pipeline("builtin.module(resolve,infer-ranks)").unwrap_err();
        assert!(e.starts_with("`builtin.module(resolve,infer-ranks)` is mlir-opt's nested pipeline syntax"), "{e}");
        assert!(e.contains("write `--passes 'resolve,infer-ranks'`"), "{e}");
        // Anchors nest; options keep their commas, brackets and blanks.
        let e = split_pipeline("builtin.module(func.func(resolve), specialize{seed=3, bind=a=[2,3]})").unwrap_err();
        assert!(e.contains("write `--passes 'resolve,specialize{seed=3, bind=a=[2,3]}'`"), "{e}");
        assert!(split_pipeline("builtin.module()").unwrap_err().contains("write `--pipeline default`, or the passes"));
    }

    #[test]
    fn options_are_key_value_items() {
        let s = parse_spec("specialize{seed=3, bind=a=[2, 3] bind=b=[]}").unwrap();
        assert_eq!(s.name, "specialize");
        let kv = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(s.options, vec![kv("seed", "3"), kv("bind", "a=[2, 3]"), kv("bind", "b=[]")]);
        assert_eq!(parse_spec("resolve").unwrap(), PassSpec { name: "resolve".into(), options: vec![] });
        assert!(parse_spec("specialize{seed}").is_err());
        assert!(parse_spec("specialize{seed=1}x").is_err());
    }

    #[test]
    fn options_override_the_drivers() {
        use crate::passes::specialize::SpecializeOptions;
        let base = DriverOptions { binds: vec!["a=[1]".into()], seed: 7, ..DriverOptions::default() };
        let spec = parse_spec("specialize{seed=3 bind=b=[2] float=f32}").unwrap();
        let o: SpecializeOptions = build("specialize", &spec.options, &base).unwrap();
        assert_eq!((o.seed, o.binds.clone(), o.float), (3, vec!["a=[1]".to_string(), "b=[2]".to_string()], FloatWidth::F32));
        let e = build::<NoOptions>("resolve", &spec.options, &base).unwrap_err();
        assert_eq!(e, "pass `resolve` has no option `seed` (it takes none)");
        let e = build::<crate::passes::lower_to_loops::LowerToLoopsOptions>("lower-to-loops", &spec.options, &base).unwrap_err();
        assert_eq!(e, "pass `lower-to-loops` has no option `seed` (it takes float)");
        let bad = parse_spec("specialize{seed=-1}").unwrap();
        assert!(build::<SpecializeOptions>("specialize", &bad.options, &base).unwrap_err().contains("expected a non-negative integer"));
        let bad = parse_spec("specialize{bind=a}").unwrap();
        assert!(build::<SpecializeOptions>("specialize", &bad.options, &base).unwrap_err().contains("option `bind=a`"));
    }
}
