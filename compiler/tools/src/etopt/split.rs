//! `--split-input-file`: the input is cut at marker lines into chunks that
//! go through the pipeline independently, and their outputs are joined
//! with the marker, as `mlir-opt` does. So one file holds many small cases.
//!
//! A chunk keeps its place in the file: it is preceded by as many empty
//! lines as the file has before it, so every diagnostic (and expectation)
//! of a chunk has the line and column it has in the whole file. Empty
//! lines are insignificant at the start of every input language.

use super::Lang;

/// The marker line, and the separator of the outputs.
pub const MARKER: &str = "// -----";

/// A line that separates chunks: `// -----`, or in a `.et` file also its
/// own comment form `# -----`; surrounding blanks are ignored.
pub fn is_marker(line: &str, lang: Lang) -> bool {
    let line = line.trim();
    line == MARKER || (lang == Lang::Et && line == "# -----")
}

/// The chunks of `text`, in order, each padded to its place in the file
/// (the marker lines belong to no chunk). Text without a marker is one
/// chunk, unchanged.
pub fn split(text: &str, lang: Lang) -> Vec<String> {
    let mut chunks = Vec::new();
    let mut chunk = String::new();
    for (i, line) in text.split_inclusive('\n').enumerate() {
        if is_marker(line, lang) {
            chunks.push(std::mem::take(&mut chunk));
            // Lines 0..=i (this marker included) precede the next chunk.
            chunk = "\n".repeat(i + 1);
        } else {
            chunk.push_str(line);
        }
    }
    chunks.push(chunk);
    chunks
}

/// The chunks' outputs joined by marker lines (a failed chunk's output is
/// empty, so the n-th output still follows the n-th marker).
pub fn join(outputs: &[String]) -> String {
    outputs.join(&format!("{MARKER}\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_keep_their_lines() {
        let text = "a\nb\n// -----\nc\n  // -----  \n\nd\n";
        let chunks = split(text, Lang::Ir);
        assert_eq!(chunks, vec!["a\nb\n", "\n\n\nc\n", "\n\n\n\n\n\nd\n"]);
        // Line 4 of the file is line 4 of its chunk.
        assert_eq!(chunks[1].lines().nth(3), Some("c"));
        assert_eq!(split("x\n", Lang::Ir), vec!["x\n"]);
    }

    #[test]
    fn markers_follow_the_language() {
        assert_eq!(split("a\n# -----\nb", Lang::Et).len(), 2);
        assert_eq!(split("a\n// -----\nb", Lang::Et).len(), 2);
        assert_eq!(split("a\n# -----\nb", Lang::Ir).len(), 1);
        // A marker must be the whole line.
        assert_eq!(split("a // -----\nb", Lang::Ir).len(), 1);
    }

    #[test]
    fn outputs_are_joined_by_markers() {
        assert_eq!(join(&["a\n".into(), String::new(), "c\n".into()]), "a\n// -----\n// -----\nc\n");
    }
}
