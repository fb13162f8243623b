//! Seeded draws: one configuration ([`Space::choose`], an error when no
//! draw in [`MAX_ATTEMPTS`] is valid, chosen by what the draws conflicted
//! with) or `reps` per rank combination ([`Space::enumerate`], with the
//! discard counts). Deterministic in the seed.

use super::{Discard, DiscardKind, Space};
use crate::random::Rng;
use et_grammar::Diagnostic;
use std::collections::BTreeMap;

/// Draws tried before giving up on finding one valid configuration.
pub const MAX_ATTEMPTS: usize = 1000;

impl<'a> Space<'a> {
    /// Draws `reps` configurations per rank combination (discarding
    /// invalid ones), returning them and the discard counts.
    pub fn enumerate(&self, reps: usize, seed: u64) -> Result<(Vec<Vec<Vec<i64>>>, BTreeMap<String, usize>), Vec<Diagnostic>> {
        let combos = self.rank_combos()?;
        let mut rng = Rng::new(seed);
        let mut out = Vec::new();
        let mut discarded = BTreeMap::new();
        for ranks in &combos {
            for _ in 0..reps {
                match self.draw(ranks, &mut rng) {
                    Ok(d) => out.push(d),
                    Err(x) => *discarded.entry(x.reason).or_insert(0) += 1,
                }
            }
        }
        Ok((out, discarded))
    }

    /// One configuration, deterministic in `seed`: a rank combination drawn
    /// among the allowed ones, then dims; retried on discarded draws.
    pub fn choose(&self, seed: u64) -> Result<Vec<Vec<i64>>, Vec<Diagnostic>> {
        let combos = self.rank_combos()?;
        let mut rng = Rng::new(seed);
        let mut last: Option<Discard> = None;
        let mut conflict: Option<Discard> = None;
        for _ in 0..MAX_ATTEMPTS {
            let k = (rng.next() % combos.len() as u64) as usize;
            match self.draw(&combos[k], &mut rng) {
                Ok(d) => return Ok(d),
                Err(x) => {
                    if matches!(x.kind, DiscardKind::Binding | DiscardKind::Input) {
                        conflict = Some(x.clone());
                    }
                    last = Some(x);
                }
            }
        }
        let x = conflict.or(last);
        let (code, msg, label) = match &x {
            Some(x) => match x.kind {
                DiscardKind::Binding => ("E0303", format!("the --bind values violate a constraint: {}", x.reason), "this constraint"),
                DiscardKind::Input => ("E0317", format!("the input arrays' shapes contradict the program: {}", x.reason), "contradicted by the input"),
                DiscardKind::InferredRange => ("E0312", x.reason.clone(), "this draw range"),
                DiscardKind::InferredNegative => ("E0313", x.reason.clone(), "this access needs more room than the array has"),
                DiscardKind::Draw => ("E0308", format!("no valid configuration found in {MAX_ATTEMPTS} draws; last draw {}", x.reason), "this constraint"),
            },
            None => ("E0308", "no valid configuration found".to_string(), "this constraint"),
        };
        let mut d = Diagnostic::error(code, msg);
        if let Some(x) = &x {
            if let Some(sp) = x.span {
                d = d.at(sp, label);
            }
            if let Some((sp, l)) = &x.also {
                d = d.also(*sp, l.clone());
            }
            match x.kind {
                DiscardKind::InferredRange => {
                    d = d.note("`DIMS(t) IN` ranges say what is drawn; an inferred dim must lie inside (bind the eintup, or widen the range)")
                }
                DiscardKind::InferredNegative => {
                    d = d.note(
                        "range inference gives the largest dims for which the access stays in bounds; here none do (supply a larger array, or bind the eintup)",
                    )
                }
                _ => {}
            }
        }
        Err(vec![d])
    }
}
