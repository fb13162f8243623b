//! Zero-filled host buffers that cost nothing until they are touched.
//!
//! Every tensor the interpreter fills and every buffer a host program
//! writes starts as zeros. Writing those zeros on the allocating thread
//! touched every page there, one thread, before the (parallel) fill or
//! kernel touched them again; a 1024 x 1024 f64 array is 2,048 page faults.
//! Instead the memory comes from the allocator already zero (`calloc`:
//! fresh pages from the kernel, never written), and on Linux a large
//! buffer is advised to transparent huge pages, so that its first touch,
//! by whichever thread, maps 2 MiB at a time (512 times fewer faults).
//! The advice is only advice: where huge pages are off or unavailable the
//! buffer is the same zeros with 4 KiB pages.

use std::alloc::{alloc_zeroed, Layout};

/// Element types whose all-zero bit pattern is the value zero (so
/// `alloc_zeroed` memory is a valid buffer of zeros).
pub(crate) trait ZeroBits: Copy {}
impl ZeroBits for i32 {}
impl ZeroBits for f32 {}
impl ZeroBits for f64 {}

/// Huge pages pay off only for buffers spanning several of them.
const HUGE_PAGE: usize = 2 << 20;

/// `len` zeros, or `None` when the memory cannot be allocated.
pub(crate) fn zeroed_vec<T: ZeroBits>(len: usize) -> Option<Vec<T>> {
    let layout = Layout::array::<T>(len).ok()?;
    if layout.size() == 0 {
        return Some(Vec::new());
    }
    // SAFETY: the layout has a non-zero size.
    let p = unsafe { alloc_zeroed(layout) }.cast::<T>();
    if p.is_null() {
        return None;
    }
    advise_huge_pages(p.cast::<u8>(), layout.size());
    // SAFETY: `p` was allocated by the global allocator with the layout
    // of `len` elements of `T` (what `Vec` itself would use), and all its
    // bytes are zero, a valid `T` each (`ZeroBits`).
    Some(unsafe { Vec::from_raw_parts(p, len, len) })
}

/// Asks the kernel to back the whole 2 MiB pages inside `[p, p + bytes)`
/// with huge pages (`madvise(MADV_HUGEPAGE)`); the advice cannot change
/// the memory's contents, and its failure changes nothing but speed.
fn advise_huge_pages(p: *mut u8, bytes: usize) {
    #[cfg(target_os = "linux")]
    {
        let start = (p as usize).next_multiple_of(HUGE_PAGE);
        let end = (p as usize + bytes) / HUGE_PAGE * HUGE_PAGE;
        if end > start {
            // SAFETY: `[start, end)` lies inside the allocation just made
            // and is page aligned; MADV_HUGEPAGE neither reads nor writes it.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = (p, bytes, HUGE_PAGE);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_zero_whatever_their_size() {
        for len in [0usize, 1, 7, 1 << 10, (3 * HUGE_PAGE) / 8 + 5] {
            let v = zeroed_vec::<f64>(len).unwrap();
            assert_eq!(v.len(), len);
            assert!(v.iter().all(|&x| x.to_bits() == 0), "len {len}");
            let w = zeroed_vec::<i32>(len).unwrap();
            assert!(w.iter().all(|&x| x == 0));
        }
    }

    #[test]
    fn an_impossible_size_is_none_not_an_abort() {
        assert!(zeroed_vec::<f64>(usize::MAX / 4).is_none());
        assert!(zeroed_vec::<f32>(usize::MAX / 8).is_none());
    }

    #[test]
    fn a_huge_buffer_is_writable_across_its_pages() {
        let mut v = zeroed_vec::<f32>(5 * HUGE_PAGE / 4 + 3).unwrap();
        let n = v.len();
        for i in (0..n).step_by(997) {
            v[i] = i as f32;
        }
        assert_eq!(v[997], 997.0);
        assert_eq!(v.iter().filter(|&&x| x != 0.0).count(), (n - 1) / 997);
    }
}
