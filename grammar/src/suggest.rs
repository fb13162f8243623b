//! "Did you mean": the known name closest to a misspelt one, for every
//! diagnostic about an unknown name (arrays, eintups, `--bind`, `--input`).

/// The candidate closest to `name` by edit distance (insertions,
/// deletions, substitutions and swaps of neighbours each cost 1), if it is
/// close enough to be a likely typo: at most a third of the name's length
/// (at least 1), as rustc suggests names; a one-letter name is anything's
/// typo, so it gets none. Ties go to the first candidate.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let len = name.chars().count();
    let limit = if len < 2 { 0 } else { (len / 3).max(1) };
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        if c == name {
            continue;
        }
        let d = distance(name, c);
        if d <= limit && best.is_none_or(|(b, _)| d < b) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// The note a diagnostic adds for an unknown `name`, if a candidate is close.
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    closest(name, candidates).map(|c| format!("did you mean `{c}`?"))
}

/// Optimal string alignment distance, over characters.
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    // Three rows: two back (for swaps), previous, current.
    let mut back: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let sub = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + sub);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                cur[j] = cur[j].min(back[j - 2] + 1);
            }
        }
        back = std::mem::replace(&mut prev, cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_their_name() {
        assert_eq!(distance("ipso", "ipos"), 1); // a swap
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(closest("ipso", ["opos", "ipos", "fpos"]), Some("ipos"));
        assert_eq!(closest("fitlers", ["input", "filters"]), Some("filters"));
        // Too far to be a typo, or the name itself: no suggestion.
        assert_eq!(closest("q", ["batch", "x"]), None);
        assert_eq!(closest("xyz", ["abc"]), None);
        assert_eq!(closest("x", ["x"]), None);
        assert_eq!(did_you_mean("strid", ["stride"]).as_deref(), Some("did you mean `stride`?"));
    }
}
