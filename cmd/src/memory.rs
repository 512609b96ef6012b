//! The binaries' allocator (mimalloc): how it is asked for memory, and how it is asked to
//! give memory back.
//!
//! mimalloc keeps freed pages committed for a while (its `purge_delay`, a second by
//! default) in case they are wanted again, and with transparent huge pages a 2 MiB page is
//! resident whole however little of it is used. Over input of large messages (lines of a
//! megabyte, each parsed into a document of many allocations) what is kept that way is
//! several times what is live: a `sluice run` over 900 KB lines that holds ~10 MB peaked
//! at 60–90 MB. Both binaries turn huge pages off; how soon freed pages go back is a trade
//! of memory against the cost of faulting them in again, which each binary chooses
//! (docs/performance.md has the measurements). A `MIMALLOC_PURGE_DELAY` or
//! `MIMALLOC_ALLOW_THP` in the environment (mimalloc's own settings) is left to win.

/// mimalloc, asked for memory as `malloc` is: the global allocator of both binaries.
///
/// `mimalloc::MiMalloc` passes every request to `mi_malloc_aligned`, even at the alignment
/// every mimalloc block already has. Its fast path takes a free block from the size's page;
/// when that page's free list is empty (blocks freed since wait on another list until the
/// next regular allocation collects them), a size that is not a power of two falls to
/// over-allocation: a block of the next class up, with the pointer moved in. A pipeline
/// that allocates and frees a few blocks of one such size per message (a small array, 48 or
/// 80 bytes) took that path every time: 12 arrays per event cost 3.6% more wall time than
/// the same arrays in power-of-two blocks. Requests whose alignment a block always has go to
/// `mi_malloc` (blocks are whole words from a 16-byte aligned start); others as before.
pub struct Allocator;

/// The alignment every mimalloc block has: sizes are rounded up to whole words, and a
/// page's first block is 16-byte aligned (`MI_PAGE_MIN_START_BLOCK_ALIGN`).
const BLOCK_ALIGN: usize = std::mem::size_of::<usize>();

// SAFETY: every pointer comes from mimalloc with at least the layout's alignment (the
// aligned calls beyond BLOCK_ALIGN), and goes back to it through `mi_free` or
// `mi_realloc*`, which take any mimalloc pointer.
unsafe impl std::alloc::GlobalAlloc for Allocator {
    #[inline]
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        use libmimalloc_sys::{mi_malloc, mi_malloc_aligned};
        // SAFETY: plain sizes and a power-of-two alignment, which Layout guarantees.
        unsafe { by_alignment(layout, mi_malloc, mi_malloc_aligned) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        use libmimalloc_sys::{mi_zalloc, mi_zalloc_aligned};
        // SAFETY: as `alloc`.
        unsafe { by_alignment(layout, mi_zalloc, mi_zalloc_aligned) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, _layout: std::alloc::Layout) {
        // SAFETY: `ptr` came from this allocator (GlobalAlloc's contract).
        unsafe { libmimalloc_sys::mi_free(ptr.cast()) }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        use libmimalloc_sys::{mi_realloc, mi_realloc_aligned};
        // SAFETY: `ptr` came from this allocator with `layout` (GlobalAlloc's contract).
        unsafe {
            if layout.align() <= BLOCK_ALIGN {
                mi_realloc(ptr.cast(), new_size).cast()
            } else {
                mi_realloc_aligned(ptr.cast(), new_size, layout.align()).cast()
            }
        }
    }
}

/// `plain(size)` when every block has `layout`'s alignment, else `aligned(size, alignment)`.
///
/// # Safety
/// `plain` and `aligned` are mimalloc's allocation calls.
#[inline(always)]
unsafe fn by_alignment(
    layout: std::alloc::Layout,
    plain: unsafe extern "C" fn(usize) -> *mut std::ffi::c_void,
    aligned: unsafe extern "C" fn(usize, usize) -> *mut std::ffi::c_void,
) -> *mut u8 {
    // SAFETY: the caller passes mimalloc's calls; they take any size.
    unsafe {
        if layout.align() <= BLOCK_ALIGN {
            plain(layout.size()).cast()
        } else {
            aligned(layout.size(), layout.align()).cast()
        }
    }
}

/// mimalloc's `mi_option_purge_delay` (mimalloc.h, v3: the option enum's 16th member).
/// libmimalloc-sys names only some options; a test checks this one's default.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Turns transparent huge pages off for this process, unless `MIMALLOC_ALLOW_THP` says
/// otherwise.
pub fn no_huge_pages() {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
        return;
    }
    #[cfg(target_os = "linux")]
    // SAFETY: prctl(PR_SET_THP_DISABLE) takes plain integers and changes only this
    // process's huge page policy.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// Freed pages go back to the OS after `ms` milliseconds (0: at once), unless
/// `MIMALLOC_PURGE_DELAY` says otherwise.
pub fn purge_after(ms: i64) {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
        return;
    }
    // SAFETY: mi_option_set takes a valid option id and a value.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, ms as std::ffi::c_long) };
}

/// The purge delay in force, in milliseconds.
pub fn purge_delay() -> i64 {
    // SAFETY: mi_option_get takes a valid option id.
    unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) as i64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_option_is_the_one_set_and_huge_pages_go_off() {
        // Its default in mimalloc v3 (1000 ms): another option at this index would differ.
        // (Unless the environment set it: then it is left alone, as below.)
        let from_env = std::env::var_os("MIMALLOC_PURGE_DELAY").is_some();
        if !from_env {
            assert_eq!(purge_delay(), 1000);
        }
        let before = purge_delay();
        purge_after(20);
        assert_eq!(purge_delay(), if from_env { before } else { 20 });
        no_huge_pages();
        #[cfg(target_os = "linux")]
        if std::env::var_os("MIMALLOC_ALLOW_THP").is_none() {
            assert_eq!(
                unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) },
                1
            );
        }
    }
}
