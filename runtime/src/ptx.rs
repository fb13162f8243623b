//! A shallow reader of PTX text: the header directives and the `.entry`
//! declarations, enough to check a bundle's `kernels.ptx` against its manifest
//! before the driver sees it (the way Triton checks its PTX after generation).
//!
//! This is not a PTX parser. It drops comments, splits the text into tokens
//! and looks at the tokens following `.version`, `.target`, `.address_size`
//! and `.entry`; everything else (kernel bodies included) is skipped.

/// What [`scan`] found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PtxInfo {
    /// The `.version` operand, e.g. `"7.0"`.
    pub version: Option<String>,
    /// The first `.target` operand, e.g. `"sm_80"`.
    pub target: Option<String>,
    /// The `.address_size` operand; PTX defaults to 32 when absent.
    pub address_size: Option<String>,
    /// Kernels in order of appearance.
    pub entries: Vec<Entry>,
}

/// One `.entry` declaration.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub name: String,
    /// Number of `.param` declarations in the parameter list.
    pub params: usize,
}

/// Scans PTX text. Fails only on text that cannot be PTX at all (an
/// unterminated comment, a directive without its operand).
pub fn scan(text: &str) -> Result<PtxInfo, String> {
    let stripped = strip_comments(text)?;
    let tokens = tokenize(&stripped);
    let mut info = PtxInfo::default();
    let mut i = 0;
    while i < tokens.len() {
        let operand = |what: &str| -> Result<String, String> {
            tokens
                .get(i + 1)
                .filter(|t| is_word(t))
                .map(|t| t.to_string())
                .ok_or_else(|| format!("`{what}` has no operand"))
        };
        match tokens[i] {
            ".version" => info.version = Some(operand(".version")?),
            ".target" => info.target = Some(operand(".target")?),
            ".address_size" => info.address_size = Some(operand(".address_size")?),
            ".entry" => {
                let name = operand(".entry")?;
                let mut params = 0;
                // A parameter list, when present, follows the name directly.
                if tokens.get(i + 2) == Some(&"(") {
                    let mut j = i + 3;
                    loop {
                        match tokens.get(j) {
                            None => return Err(format!("the parameter list of `.entry {name}` is not closed")),
                            Some(&")") => break,
                            Some(&".param") => params += 1,
                            Some(_) => {}
                        }
                        j += 1;
                    }
                    i = j;
                }
                info.entries.push(Entry { name, params });
            }
            _ => {}
        }
        i += 1;
    }
    Ok(info)
}

/// Characters of a PTX word: identifiers, directives (`.entry`), registers
/// (`%r1`), numbers and versions (`7.0`).
fn is_word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '$' | '%' | '.')
}

fn is_word(t: &str) -> bool {
    t.chars().all(is_word_char) && !t.is_empty()
}

/// Words, string literals, and single punctuation characters.
fn tokenize(text: &str) -> Vec<&str> {
    let mut tokens = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if c.is_whitespace() {
            rest = &rest[c.len_utf8()..];
        } else if is_word_char(c) {
            let end = rest.find(|c: char| !is_word_char(c)).unwrap_or(rest.len());
            tokens.push(&rest[..end]);
            rest = &rest[end..];
        } else if c == '"' {
            // `.file 1 "a(b).et"`: a string's contents are not tokens.
            let end = rest[1..].find('"').map_or(rest.len(), |e| e + 2);
            tokens.push(&rest[..end]);
            rest = &rest[end..];
        } else {
            tokens.push(&rest[..c.len_utf8()]);
            rest = &rest[c.len_utf8()..];
        }
    }
    tokens
}

/// Replaces `// ...` and `/* ... */` comments by a space, leaving string
/// literals alone (a file name may contain `//`).
fn strip_comments(text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |e| &after[e..]);
            out.push(' ');
        } else if let Some(after) = rest.strip_prefix("/*") {
            let end = after.find("*/").ok_or("a `/*` comment is not closed")?;
            rest = &after[end + 2..];
            out.push(' ');
        } else if let Some(after) = rest.strip_prefix('"') {
            let end = after.find('"').map_or(after.len(), |e| e + 1);
            out.push('"');
            out.push_str(&after[..end]);
            rest = &after[end..];
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llvm_style_header_and_entries() {
        let text = "//\n// Generated by LLVM NVPTX Back-End\n//\n\n.version 7.0\n.target sm_80\n.address_size 64\n\n\t// .globl\ts2_y // -- Begin function s2_y\n.visible .entry s2_y(\n\t.param .u64 s2_y_param_0,\n\t.param .u64 s2_y_param_1\n)\n{\n\tret;\n}\n/* .entry fake( .param .u64 a ) */\n.visible .entry noargs\n{\n ret;\n}\n";
        let info = scan(text).unwrap();
        assert_eq!(info.version.as_deref(), Some("7.0"));
        assert_eq!(info.target.as_deref(), Some("sm_80"));
        assert_eq!(info.address_size.as_deref(), Some("64"));
        assert_eq!(
            info.entries,
            vec![Entry { name: "s2_y".into(), params: 2 }, Entry { name: "noargs".into(), params: 0 }]
        );
    }

    #[test]
    fn target_with_options_and_strings() {
        let info = scan(".version 8.0 .target sm_90, debug .address_size 64 .file 1 \"a//b(.entry x\"").unwrap();
        assert_eq!(info.target.as_deref(), Some("sm_90"));
        assert!(info.entries.is_empty());
    }

    #[test]
    fn malformed() {
        assert!(scan("/* open").is_err());
        assert!(scan(".entry k( .param .u64 a").is_err());
        assert!(scan(".version").is_err());
    }
}
