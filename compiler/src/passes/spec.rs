//! The textual pass pipeline of `etopt --passes`, written as `mlir-opt`
//! writes one: pass names separated by commas, each with optional options
//! in braces, `resolve,infer-ranks,specialize{seed=3 bind=a=[2,3]}`.
//! Inside the braces, options are `key=value`, separated by blanks or
//! commas; a value may hold brackets (`[2, 3]`), whose commas and blanks
//! belong to it. A pass's options override the driver's (`--seed`,
//! `--bind`, `--float`) for that pass alone.

use super::Options;

/// One pass of a pipeline as written: its name and its options in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassSpec {
    pub name: String,
    pub options: Vec<(String, String)>,
}

/// Every option some pass accepts, with what it sets and its value's form
/// (shown by `--list-passes`).
pub const OPTIONS: &[(&str, &str)] = &[
    ("seed", "N: the seed of drawn dims (as --seed)"),
    ("bind", "NAME=[d1,..]: fix an eintup's dims, repeatable (as --bind)"),
    ("float", "f64|f32: the width of FLOAT (as --float)"),
    ("fp-contract", "off|fast: the GPU float policy (as --fp-contract)"),
    ("layout", "cyclic|blocked: a thread's register tile, strided (GPU) or contiguous (host)"),
];

/// Cuts a pipeline at the commas outside braces and brackets.
pub fn split_pipeline(text: &str) -> Result<Vec<String>, String> {
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

/// `name` or `name{key=value ...}`.
pub fn parse_spec(text: &str) -> Result<PassSpec, String> {
    let Some(open) = text.find('{') else { return Ok(PassSpec { name: text.trim().to_string(), options: Vec::new() }) };
    let name = text[..open].trim().to_string();
    let Some(body) = text[open + 1..].strip_suffix('}') else {
        return Err(format!("`{text}`: the options of a pass end with `}}` and nothing follows them"));
    };
    let mut options = Vec::new();
    for item in split_options(body) {
        let Some((k, v)) = item.split_once('=') else {
            return Err(format!("`{text}`: option `{item}` is not of the form key=value"));
        };
        options.push((k.trim().to_string(), v.trim().to_string()));
    }
    Ok(PassSpec { name, options })
}

/// The `key=value` items of a brace body: cut at blanks and commas outside
/// brackets.
fn split_options(body: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut depth = 0;
    for ch in body.chars() {
        match ch {
            '[' | '{' => depth += 1,
            ']' | '}' => depth -= 1,
            c if depth == 0 && (c == ',' || c.is_whitespace()) => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                continue;
            }
            _ => {}
        }
        cur.push(ch);
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// `base` with a pass's options applied; `accepted` are the keys the pass
/// reads. An option the pass does not read, or a malformed value, is an
/// error naming both.
pub fn apply(pass: &str, accepted: &[&str], options: &[(String, String)], base: &Options) -> Result<Options, String> {
    let mut o = base.clone();
    for (k, v) in options {
        if !accepted.contains(&k.as_str()) {
            let known = if accepted.is_empty() { "it takes none".to_string() } else { format!("it takes {}", accepted.join(", ")) };
            return Err(format!("pass `{pass}` has no option `{k}` ({known})"));
        }
        match k.as_str() {
            "seed" => o.seed = v.parse().map_err(|_| format!("pass `{pass}`: option `seed={v}`: expected a non-negative integer"))?,
            "bind" => {
                let b = crate::sema::parse_binding(v).map_err(|e| format!("pass `{pass}`: option `bind={v}`: {e}"))?;
                // The pass's binding replaces the driver's for that eintup.
                o.binds.retain(|d| crate::sema::parse_binding(d).map_or(true, |d| d.name != b.name));
                o.binds.push(v.clone());
            }
            "float" => o.float = v.parse().map_err(|_| format!("pass `{pass}`: option `float={v}`: expected f64 or f32"))?,
            "layout" => o.layout = v.parse().map_err(|e| format!("pass `{pass}`: option `layout={v}`: {e}"))?,
            "fp-contract" => o.fp_contract = v.parse().map_err(|e| format!("pass `{pass}`: option `fp-contract={v}`: {e}"))?,
            _ => return Err(format!("pass `{pass}`: option `{k}` is declared but not handled")),
        }
    }
    Ok(o)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::loops::FloatWidth;

    #[test]
    fn pipelines_split_outside_braces_and_brackets() {
        assert_eq!(split_pipeline("resolve, infer-ranks,specialize{bind=a=[2,3] seed=1}").unwrap(), vec!["resolve", "infer-ranks", "specialize{bind=a=[2,3] seed=1}"]);
        assert!(split_pipeline("specialize{seed=1").is_err());
        assert!(split_pipeline("a}").is_err());
        assert!(split_pipeline("a,,b").is_err());
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
        let base = Options { binds: vec!["a=[1]".into()], seed: 7, ..Options::default() };
        let spec = parse_spec("specialize{seed=3 bind=b=[2] float=f32}").unwrap();
        let o = apply("specialize", &["seed", "bind", "float"], &spec.options, &base).unwrap();
        assert_eq!((o.seed, o.binds.clone(), o.float), (3, vec!["a=[1]".to_string(), "b=[2]".to_string()], FloatWidth::F32));
        let e = apply("resolve", &[], &spec.options, &base).unwrap_err();
        assert_eq!(e, "pass `resolve` has no option `seed` (it takes none)");
        let bad = parse_spec("specialize{seed=-1}").unwrap();
        assert!(apply("specialize", &["seed"], &bad.options, &base).unwrap_err().contains("expected a non-negative integer"));
        let bad = parse_spec("specialize{bind=a}").unwrap();
        assert!(apply("specialize", &["bind"], &bad.options, &base).unwrap_err().contains("option `bind=a`"));
    }
}
