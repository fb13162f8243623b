//! `share-buffers` (host and GPU, last): buffer assignment. A `transient`
//! buffer (a temporary a loop pass made: a panel, a snapshot, partial
//! sums) whose uses all come after the last use of another transient
//! takes that one's memory, as XLA's and IREE's buffer assignment do.
//!
//! Kernels run in module order, so a buffer's live range is its first and
//! last using kernel. Transients are visited by first use; `B` moves into
//! an earlier transient `A` (the smallest that fits) when both are static
//! and of one element type, `A` has at least `B`'s elements, every use of
//! `A` and of the buffers already in it precedes `B`'s first kernel, and
//! that kernel writes every element of `B` before anything reads it
//! (`Kernel::writes_whole`): the zeros `B` would have started with are never seen.
//! Every access of `B` then goes to `A` at the same offset and `B` is
//! removed. Program arrays (`input`, `output`, `temp`) keep their memory:
//! their final contents are the program's results.
//!
//! ```text
//! buffer b_panel : f64[128, 1024, 8] transient       buffer b_panel : f64[128, 1024, 8] transient
//! buffer c_panel : f64[128, 1024, 8] transient
//! kernel @s4_y_pack { .. store c_panel[..] = %0 }  =>  kernel @s4_y_pack { .. store b_panel[..] = %0 }
//! kernel @s4_y { .. load c_panel[..] .. }              kernel @s4_y { .. load b_panel[..] .. }
//! ```

use super::{Ir, NoOptions, PassError, Unit};
use crate::ir::loops::*;

pub fn run(unit: &mut Unit, _: &NoOptions) -> Result<Option<String>, PassError> {
    let Ir::Loop(m) = &mut unit.ir else { return Err(PassError::Internal("share-buffers runs on the loop level".into())) };
    let shared = share(m);
    let bytes: i64 = shared.iter().map(|s| s.bytes).sum();
    let pairs: Vec<String> = shared.iter().map(|s| format!("{} -> {}", s.guest, s.host)).collect();
    Ok(Some(match shared.len() {
        0 => "0 buffers shared".to_string(),
        n => format!("{n} buffer{} shared ({}), {bytes} bytes saved", if n == 1 { "" } else { "s" }, pairs.join(", ")),
    }))
}

/// One assignment: buffer `guest` now lives in buffer `host`.
#[derive(Clone, Debug, PartialEq)]
pub struct Shared {
    pub guest: String,
    pub host: String,
    /// The guest's size.
    pub bytes: i64,
}

/// Shares what qualifies in `m` (module docs); returns the assignments.
pub fn share(m: &mut LoopModule) -> Vec<Shared> {
    let ranges = m.live_ranges();
    let len = |b: BufId| m.buffers[b].len().filter(|&n| n > 0 && m.buffers[b].dims().is_some());
    let mut order: Vec<(usize, BufId)> = (0..m.buffers.len())
        .filter(|&b| m.buffers[b].role == Role::Transient && len(b).is_some())
        .filter_map(|b| ranges[b].map(|(first, _)| (first, b)))
        .collect();
    order.sort_unstable();
    // Each host: its buffer and the last kernel that uses it or a guest.
    let mut hosts: Vec<(BufId, usize)> = Vec::new();
    let mut target: Vec<BufId> = (0..m.buffers.len()).collect();
    let mut shared = Vec::new();
    for (first, b) in order {
        let (Some(n), Some((_, last))) = (len(b), ranges[b]) else { continue };
        let fits = |h: BufId| m.buffers[h].dtype == m.buffers[b].dtype && len(h).is_some_and(|hn| hn >= n);
        let host = hosts.iter_mut().filter(|(h, end)| *end < first && fits(*h)).min_by_key(|(h, _)| len(*h));
        match host {
            Some(host) if m.kernels[first].writes_whole(b, n) => {
                target[b] = host.0;
                host.1 = last;
                shared.push(Shared { guest: m.buffers[b].name.clone(), host: m.buffers[host.0].name.clone(), bytes: n * m.buffers[b].dtype.size() as i64 });
            }
            _ => hosts.push((b, last)),
        }
    }
    if !shared.is_empty() {
        remove_guests(m, &target);
    }
    shared
}

/// Drops every buffer `b` with `target[b] != b`, its accesses renamed to
/// its target, and renumbers the buffers that stay.
fn remove_guests(m: &mut LoopModule, target: &[BufId]) {
    let mut new_id = vec![0; target.len()];
    let mut next = 0;
    for (b, id) in new_id.iter_mut().enumerate() {
        if target[b] == b {
            *id = next;
            next += 1;
        }
    }
    let map = |b: BufId| new_id[target[b]];
    for k in &mut m.kernels {
        rename_buffers(&mut k.body, &map);
    }
    let mut b = 0;
    m.buffers.retain(|_| {
        b += 1;
        target[b - 1] == b - 1
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::loops::parse::parse_verified;

    fn shared(text: &str) -> (Vec<Shared>, LoopModule) {
        let mut m = parse_verified(text).unwrap();
        let s = share(&mut m);
        crate::ir::loops::verify::verify(&m).unwrap();
        (s, m)
    }

    /// Two panels, one after the other, each written whole by a copy and
    /// then read: the second moves into the first.
    const CHAIN: &str = "buffer b : f64[4, 6] input
buffer c : f64[4, 6] input
buffer y : f64[6] output
buffer b_panel : f64[6, 4] transient
buffer c_panel : f64[6, 4] transient

kernel @pack_b {
  for j in [0, 6) parallel {
    for k in [0, 4) parallel {
      %0 = load b[((k * 6) + j)] : f64
      store b_panel[((j * 4) + k)] = %0
    }
  }
}

kernel @use_b {
  for j in [0, 6) parallel {
    for k in [0, 4) reduce {
      %0 = load b_panel[((j * 4) + k)] : f64
      accumulate y[j] += %0
    }
  }
}

kernel @pack_c {
  for k in [1, 5) parallel {
    for j in [0, 6) parallel {
      %0 = load c[(((k - 1) * 6) + j)] : f64
      store c_panel[((j * 4) + (k - 1))] = %0
    }
  }
}

kernel @use_c {
  for j in [0, 6) parallel {
    for k in [0, 4) reduce {
      %0 = load c_panel[((j * 4) + k)] : f64
      accumulate y[j] += %0
    }
  }
}
";

    #[test]
    fn a_panel_after_the_last_use_of_another_takes_its_memory() {
        let (s, m) = shared(CHAIN);
        assert_eq!(s, vec![Shared { guest: "c_panel".into(), host: "b_panel".into(), bytes: 192 }]);
        assert_eq!(m.buffers.iter().map(|b| b.name.as_str()).collect::<Vec<_>>(), ["b", "c", "y", "b_panel"]);
        assert!(m.kernels[2].buffers().contains(&3) && m.kernels[3].buffers().contains(&3));
    }

    #[test]
    fn overlapping_ranges_partial_writers_and_program_arrays_keep_their_memory() {
        // `use_b` after `pack_c`: both panels live at once.
        let overlap = CHAIN.replace(
            "kernel @use_c",
            "kernel @use_b2 {\n  for j in [0, 6) parallel {\n    %0 = load b_panel[(j * 4)] : f64\n    accumulate y[j] += %0\n  }\n}\n\nkernel @use_c",
        );
        assert_eq!(shared(&overlap).0, vec![]);
        // The first writer misses k = 4 (its loop stops at 4 after starting at 1).
        assert_eq!(shared(&CHAIN.replace("for k in [1, 5) parallel", "for k in [1, 4) parallel")).0, vec![]);
        // A first kernel that adds to the buffer reads its zeros.
        assert_eq!(shared(&CHAIN.replace("store c_panel[((j * 4) + (k - 1))] = %0", "accumulate c_panel[((j * 4) + (k - 1))] += %0")).0, vec![]);
        // Another dtype, a larger guest, and program arrays.
        let f32_guest = CHAIN
            .replace("buffer c_panel : f64[6, 4]", "buffer c_panel : f32[6, 4]")
            .replace("store c_panel[((j * 4) + (k - 1))] = %0", "%1 = cast %0 : f32\n      store c_panel[((j * 4) + (k - 1))] = %1")
            .replace(
                "%0 = load c_panel[((j * 4) + k)] : f64\n      accumulate y[j] += %0",
                "%0 = load c_panel[((j * 4) + k)] : f32\n      %1 = cast %0 : f64\n      accumulate y[j] += %1",
            );
        assert_eq!(shared(&f32_guest).0, vec![]);
        assert_eq!(
            shared(
                &CHAIN
                    .replace("buffer b_panel : f64[6, 4] transient", "buffer b_panel : f64[6, 3] transient")
                    .replace(
                        "for k in [0, 4) parallel {\n      %0 = load b[((k * 6) + j)] : f64\n      store b_panel[((j * 4) + k)]",
                        "for k in [0, 3) parallel {\n      %0 = load b[((k * 6) + j)] : f64\n      store b_panel[((j * 3) + k)]"
                    )
                    .replace(
                        "for k in [0, 4) reduce {\n      %0 = load b_panel[((j * 4) + k)]",
                        "for k in [0, 3) reduce {\n      %0 = load b_panel[((j * 3) + k)]"
                    )
            )
            .0,
            vec![]
        );
        assert_eq!(shared(&CHAIN.replace("c_panel : f64[6, 4] transient", "c_panel : f64[6, 4] temp")).0, vec![]);
    }
}
