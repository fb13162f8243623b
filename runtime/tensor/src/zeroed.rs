//! Zero-filled host buffers that cost nothing until they are touched.
//!
//! Every tensor the interpreter fills and every buffer a host program
//! writes starts as zeros. Writing those zeros on the allocating thread
//! (`Vec::resize`) touched every page there, one thread, before the
//! parallel fill or kernel touched them again. Instead the memory comes
//! from the allocator already zero (`calloc`: fresh pages from the kernel,
//! zeroed by it on first touch, by whichever thread touches them).
//!
//! Tried and not kept (2026-11-26, docs/journal/performance.md section 9): advising
//! large buffers to transparent huge pages (`madvise(MADV_HUGEPAGE)`) cut
//! the page faults of the 1024 chain from 16,481 to 5,752 but not its
//! time (0.212-0.224 s against 0.221-0.250 s, `perf stat -r 8`, within the
//! noise), and made the kernel's compaction a risk on a busy machine.

use std::alloc::{alloc_zeroed, Layout};

/// Element types whose all-zero bit pattern is the value zero (so
/// `alloc_zeroed` memory is a valid buffer of zeros).
pub(crate) trait ZeroBits: Copy {}
impl ZeroBits for u8 {}
impl ZeroBits for i32 {}
impl ZeroBits for f32 {}
impl ZeroBits for f64 {}

/// `len` zero bytes, or `None` when the memory cannot be allocated: what the
/// emulator's device memory is made of, sized by a bundle or a caller.
pub fn zeroed_bytes(len: usize) -> Option<Vec<u8>> {
    zeroed_vec(len)
}

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
    // SAFETY: `p` was allocated by the global allocator with the layout
    // of `len` elements of `T` (what `Vec` itself would use), and all its
    // bytes are zero, a valid `T` each (`ZeroBits`).
    Some(unsafe { Vec::from_raw_parts(p, len, len) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_zero_whatever_their_size() {
        for len in [0usize, 1, 7, 1 << 10, (3 << 20) / 8 + 5] {
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
    fn a_large_buffer_is_writable_across_its_pages() {
        let mut v = zeroed_vec::<f32>((5 << 20) / 4 + 3).unwrap();
        let n = v.len();
        for i in (0..n).step_by(997) {
            v[i] = i as f32;
        }
        assert_eq!(v[997], 997.0);
        assert_eq!(v.iter().filter(|&&x| x != 0.0).count(), (n - 1) / 997);
    }
}
