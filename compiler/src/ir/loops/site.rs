//! Places in a loop module: what a verifier error is about ([`Site`]), and,
//! for a module parsed from text, where each place is in that text
//! ([`Spans`], filled by the parser). The verifier names a site; a caller
//! that has the text turns it into a located diagnostic, one without text
//! prints the site's line (`print::site_line`).

use super::{BufId, LoopModule, Node, ValId};
use et_grammar::Span;
use std::collections::HashMap;

/// A place in a module.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Site {
    /// The module as a whole.
    Module,
    Buffer(BufId),
    /// Kernel number `k` (its header: name and `vars(..)`).
    Kernel(usize),
    /// A node of kernel `k`, by the positions leading to it: `[2, 0]` is
    /// the first node inside the third node of the kernel's body.
    Node(usize, Vec<usize>),
    /// A value of the compute node at the path.
    Value(usize, Vec<usize>, ValId),
    /// The write of the compute node at the path.
    Write(usize, Vec<usize>),
}

impl Site {
    /// The smallest site that contains this one: a value's or write's
    /// compute node, a node's parent node or kernel, a kernel's module.
    pub fn parent(&self) -> Option<Site> {
        match self {
            Site::Module => None,
            Site::Buffer(_) | Site::Kernel(_) => Some(Site::Module),
            Site::Node(k, path) => match path.split_last() {
                Some((_, [])) | None => Some(Site::Kernel(*k)),
                Some((_, up)) => Some(Site::Node(*k, up.to_vec())),
            },
            Site::Value(k, path, _) | Site::Write(k, path) => Some(Site::Node(*k, path.clone())),
        }
    }

    /// The node at a `Node`, `Value` or `Write` site, if the path leads to one.
    pub fn node<'m>(&self, m: &'m LoopModule) -> Option<&'m Node> {
        let (Site::Node(k, path) | Site::Value(k, path, _) | Site::Write(k, path)) = self else { return None };
        let (first, rest) = path.split_first()?;
        let mut n = m.kernels.get(*k)?.body.get(*first)?;
        for &i in rest {
            n = n.body().get(i)?;
        }
        Some(n)
    }
}

/// Where the sites of a parsed module are in its text.
#[derive(Clone, Debug, Default)]
pub struct Spans(HashMap<Site, Span>);

impl Spans {
    pub(crate) fn insert(&mut self, site: Site, span: Span) {
        self.0.insert(site, span);
    }

    /// The span of `site`, or of the smallest site around it that has one.
    pub fn get(&self, site: &Site) -> Option<Span> {
        let mut s = Some(site.clone());
        while let Some(x) = s {
            if let Some(sp) = self.0.get(&x) {
                return Some(*sp);
            }
            s = x.parent();
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_without_a_span_falls_back_to_its_container() {
        let mut s = Spans::default();
        s.insert(Site::Kernel(1), Span::new(10, 20));
        s.insert(Site::Node(1, vec![0]), Span::new(30, 40));
        assert_eq!(s.get(&Site::Value(1, vec![0, 2], 3)), Some(Span::new(30, 40)));
        assert_eq!(s.get(&Site::Write(1, vec![1])), Some(Span::new(10, 20)));
        assert_eq!(s.get(&Site::Kernel(0)), None);
        assert_eq!(s.get(&Site::Buffer(0)), None);
    }
}
