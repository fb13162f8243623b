//! `--bind NAME=[d1, ...]`: an eintup's dims given on a command line.
//!
//! The compiler's tools (`run`, `build`, `check`) and the runtime's
//! (`exec`, `etrun`, binding a dynamic bundle) read the same grammar, so it
//! lives in the crate both share rather than once in each.

/// `--bind NAME=[d1, ...]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    pub name: String,
    pub dims: Vec<i64>,
}

/// Parses `--bind` arguments. A malformed one is an error, and so is an
/// eintup bound twice, even to the same dims: a second `--bind` is a
/// slip (a copied line, a script's default and the user's value) that
/// would otherwise go unnoticed, or silently take one of two values.
pub fn parse_bindings<S: AsRef<str>>(binds: &[S]) -> Result<Vec<Binding>, String> {
    let parsed: Vec<Binding> = binds.iter().map(|b| parse_binding(b.as_ref())).collect::<Result<_, _>>()?;
    for (i, b) in parsed.iter().enumerate() {
        if let Some(a) = parsed[..i].iter().find(|a| a.name == b.name) {
            let what = if a.dims == b.dims { format!("twice, to {:?}", a.dims) } else { format!("twice, to {:?} and to {:?}", a.dims, b.dims) };
            return Err(format!("eintup `{}` is bound {what}: give one --bind per eintup", b.name.escape_debug()));
        }
    }
    Ok(parsed)
}

/// Parses `NAME=[d1,d2,...]` (`NAME=[]` is rank 0).
pub fn parse_binding(s: &str) -> Result<Binding, String> {
    // Control characters are shown escaped, never sent to the terminal.
    let bad = || format!("invalid binding `{}`: expected NAME=[d1,d2,...] with non-negative integers (NAME=[] is rank 0)", s.escape_debug());
    let (name, rest) = s.split_once('=').ok_or_else(bad)?;
    let name = name.trim();
    if name.is_empty() || !name.chars().all(|c| c.is_alphanumeric() || c == '_') {
        return Err(bad());
    }
    let inner = rest.trim().strip_prefix('[').and_then(|r| r.strip_suffix(']')).ok_or_else(bad)?;
    let mut dims = Vec::new();
    if !inner.trim().is_empty() {
        for p in inner.split(',') {
            let d: i64 = p.trim().parse().map_err(|_| bad())?;
            if d < 0 {
                return Err(bad());
            }
            dims.push(d);
        }
    }
    Ok(Binding { name: name.to_string(), dims })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_parse() {
        assert_eq!(parse_binding("a=[2, 3]"), Ok(Binding { name: "a".into(), dims: vec![2, 3] }));
        assert_eq!(parse_binding("r=[]"), Ok(Binding { name: "r".into(), dims: vec![] }));
        assert_eq!(parse_binding("z=[0]"), Ok(Binding { name: "z".into(), dims: vec![0] }));
        assert!(parse_binding("a=[-1]").is_err());
        assert!(parse_binding("a=2").is_err());
        assert!(parse_binding("=[2]").is_err());
        assert!(parse_binding("a=[x]").is_err());
        // The terminal never sees a raw escape.
        assert!(!parse_binding("a\x1b[31m=[1]").unwrap_err().contains('\x1b'));
    }

    #[test]
    fn an_eintup_bound_twice_is_an_error() {
        let e = parse_bindings(&["a=[2]", "c=[1]", "a=[3]"]).unwrap_err();
        assert!(e.contains("`a` is bound twice, to [2] and to [3]"), "{e}");
        // Even to the same dims (issue #26 item 6: it was accepted silently).
        let e = parse_bindings(&["a=[2]", "a=[2]"]).unwrap_err();
        assert!(e.contains("`a` is bound twice, to [2]:"), "{e}");
        assert_eq!(parse_bindings(&["a=[2]", "b=[2]"]).unwrap().len(), 2);
    }
}
