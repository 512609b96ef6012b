//! The binaries' allocator (mimalloc for small blocks, the C library's `malloc` for large
//! ones): how it is asked for memory, and how it is asked to give memory back.
//!
//! mimalloc keeps freed pages committed for a while (its `purge_delay`, a second by
//! default) in case they are wanted again, and with transparent huge pages a 2 MiB page is
//! resident whole however little of it is used. Over input of large messages (lines of a
//! megabyte, each parsed into a document of many allocations) what is kept that way is
//! several times what is live: a `sluice run` over 900 KB lines that holds ~10 MB peaked
//! at 60–90 MB. Both binaries turn huge pages off; how soon freed pages go back is a trade
//! of memory against the cost of faulting them in again, which each binary chooses
//! (docs/notes/performance-log.md has the measurements). A `MIMALLOC_PURGE_DELAY` or
//! `MIMALLOC_ALLOW_THP` in the environment (mimalloc's own settings) is left to win.
//!
//! In `sluice`, blocks larger than mimalloc's large objects ([`LARGE_BLOCK`]: a line of
//! input, its serialised output, a big document's member list) go to the C library instead
//! ([`Allocator::LARGE_FROM_LIBC`]), which reuses a freed block for the next one at once.

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
///
/// [`Allocator::LARGE_FROM_LIBC`] (`sluice`'s) sends blocks past [`LARGE_BLOCK`] to the C
/// library's `malloc` (on glibc; mimalloc elsewhere). mimalloc gives each such block a page
/// of its own and, when another thread frees it (a line is read on the input thread and
/// freed on a worker, its output made on a worker and freed by the send), leaves the page
/// to its owner's next collection and the arena's purge delay: fed 900 KB lines as fast as `cat` feeds them, `sluice run
/// --workers 2` held 65–80 MB where ~11 MB was live. glibc puts the freed block back in
/// its arena's free lists, where the next line's allocation finds it, and returns what
/// gathers at the top of a heap past a few MiB ([`tune_large_blocks`]): the same run peaks
/// at 45–50 MB in the same time. Small blocks, which are nearly all of them, stay with
/// mimalloc. [`Allocator::MIMALLOC`] (`sluice-lambda`'s) keeps every block in mimalloc:
/// with its purge delay of 0 a freed page goes back at once, and over a 6 MB Kinesis
/// event it peaks 10–13 MB lower than with glibc's arenas (docs/notes/performance-log.md).
pub struct Allocator {
    large_from_libc: bool,
}

impl Allocator {
    /// mimalloc for every block.
    pub const MIMALLOC: Allocator = Allocator {
        large_from_libc: false,
    };
    /// mimalloc up to [`LARGE_BLOCK`], the C library's `malloc` past it.
    pub const LARGE_FROM_LIBC: Allocator = Allocator {
        large_from_libc: true,
    };

    /// Whether a block of `layout` comes from the C library: this allocator sends large
    /// blocks there, the block is large, at an alignment `malloc` gives, and the C library
    /// is glibc (whose arenas [`tune_large_blocks`] tunes).
    #[inline(always)]
    fn uses_libc(&self, layout: std::alloc::Layout) -> bool {
        cfg!(all(target_os = "linux", target_env = "gnu"))
            && self.large_from_libc
            && layout.size() > LARGE_BLOCK
            && layout.align() <= LIBC_ALIGN
    }
}

/// The largest block mimalloc serves from a shared page (`MI_LARGE_MAX_OBJ_SIZE` in v3);
/// larger ones go to the C library (see [`Allocator`]).
pub const LARGE_BLOCK: usize = 512 * 1024;

/// The alignment every block of the C library's `malloc` has (two words on glibc).
const LIBC_ALIGN: usize = 2 * std::mem::size_of::<usize>();

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
        if self.uses_libc(layout) {
            // SAFETY: a plain size; `malloc`'s alignment covers the layout's (`uses_libc`).
            return unsafe { libc::malloc(layout.size()).cast() };
        }
        // SAFETY: plain sizes and a power-of-two alignment, which Layout guarantees.
        unsafe { by_alignment(layout, mi_malloc, mi_malloc_aligned) }
    }

    #[inline]
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        use libmimalloc_sys::{mi_zalloc, mi_zalloc_aligned};
        if self.uses_libc(layout) {
            // SAFETY: as `alloc`.
            return unsafe { libc::calloc(1, layout.size()).cast() };
        }
        // SAFETY: as `alloc`.
        unsafe { by_alignment(layout, mi_zalloc, mi_zalloc_aligned) }
    }

    #[inline]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        // SAFETY: `ptr` came from this allocator with `layout` (GlobalAlloc's contract), so
        // from the allocator `self.uses_libc(layout)` chose then.
        unsafe {
            if self.uses_libc(layout) {
                libc::free(ptr.cast())
            } else {
                libmimalloc_sys::mi_free(ptr.cast())
            }
        }
    }

    #[inline]
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        use libmimalloc_sys::{mi_realloc, mi_realloc_aligned};
        // SAFETY: `ptr` came from this allocator with `layout` (GlobalAlloc's contract), and
        // `new_size` is non-zero and does not overflow at that alignment (its contract too).
        unsafe {
            let new_layout =
                std::alloc::Layout::from_size_align_unchecked(new_size, layout.align());
            let (was, will) = (self.uses_libc(layout), self.uses_libc(new_layout));
            if was && will {
                return libc::realloc(ptr.cast(), new_size).cast();
            }
            if was != will {
                // From one allocator to the other: a new block, the contents, the old freed.
                let new = self.alloc(new_layout);
                if !new.is_null() {
                    std::ptr::copy_nonoverlapping(ptr, new, layout.size().min(new_size));
                    self.dealloc(ptr, layout);
                }
                return new;
            }
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

/// How soon freed pages go back to the OS, in milliseconds, where messages may be large:
/// over lines of 900 KB parsed into documents of many keys (huge pages off), peak RSS was
/// 61–67 MB with mimalloc's default of 1000, 48–54 MB at 20 ms and 37 MB at 0, for 8% and
/// 100% more time (docs/notes/performance-log.md).
pub const PURGE_DELAY_MS: i64 = 20;

/// How soon freed pages go back while every message read has been small: mimalloc's
/// default. A small message's pages are wanted again within milliseconds; purged after
/// 20 ms, each came back through a page fault, which cost two workers 3–4% of their time on
/// 200k Zeek events (and the CPU that `madvise` takes from the other core).
pub const SMALL_MESSAGES_PURGE_DELAY_MS: i64 = 1000;

/// A message of this many bytes or more is large: from the first one read on, freed pages
/// go back after [`PURGE_DELAY_MS`].
pub const LARGE_MESSAGE_BYTES: usize = 64 << 10;

/// Whether a large message was read since [`purge_by_message_size`].
static LARGE_MESSAGE_READ: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Keeps freed pages for [`SMALL_MESSAGES_PURGE_DELAY_MS`] until [`message_read`] sees a
/// large message, then for [`PURGE_DELAY_MS`] (for good: a source that sent one large
/// message may send more). What `sluice run` does, which reads every message itself.
pub fn purge_by_message_size() {
    LARGE_MESSAGE_READ.store(false, std::sync::atomic::Ordering::Relaxed);
    purge_after(SMALL_MESSAGES_PURGE_DELAY_MS);
}

/// Notes that a message of `bytes` was read (see [`purge_by_message_size`]).
#[inline]
pub fn message_read(bytes: usize) {
    if bytes >= LARGE_MESSAGE_BYTES
        && !LARGE_MESSAGE_READ.swap(true, std::sync::atomic::Ordering::Relaxed)
    {
        purge_after(PURGE_DELAY_MS);
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

/// glibc's settings for the large blocks [`Allocator::LARGE_FROM_LIBC`] gives it, unless
/// `GLIBC_TUNABLES` in the environment sets its own: blocks up to 32 MiB come from its arenas (not a fresh
/// `mmap` each, which the kernel zeroes and faults in page by page), and a heap gives back
/// what is free at its top once that passes 4 MiB. (Setting either also stops glibc from
/// moving its `mmap` threshold up to the largest block freed.) Measured in
/// docs/notes/performance-log.md: a 16 MiB top kept nested 900 KB lines 20% faster and their peak 8
/// MB higher, past the 64 MB the CLI is held to with two workers.
pub fn tune_large_blocks() {
    if std::env::var_os("GLIBC_TUNABLES").is_some() {
        return;
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt takes plain integers and changes only glibc's own thresholds.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 4 << 20);
    }
}

/// The purge delay in force, in milliseconds.
pub fn purge_delay() -> i64 {
    // SAFETY: mi_option_get takes a valid option id.
    unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) as i64 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::{GlobalAlloc, Layout};

    /// Blocks move between mimalloc and the C library as `realloc` takes them across
    /// [`LARGE_BLOCK`], keeping their contents; zeroed blocks are zero on both sides.
    #[test]
    fn blocks_keep_their_contents_across_the_large_block_bound() {
        let a = Allocator::LARGE_FROM_LIBC;
        let sizes = [
            64,
            LARGE_BLOCK,
            LARGE_BLOCK + 1,
            3 * LARGE_BLOCK,
            LARGE_BLOCK + 8,
            100,
            2 * LARGE_BLOCK,
        ];
        for align in [1, 8, 16, 64] {
            let mut layout = Layout::from_size_align(sizes[0], align).unwrap();
            // SAFETY: each block is used within its layout and freed with it.
            unsafe {
                let mut p = a.alloc(layout);
                assert!(!p.is_null());
                let fill = |p: *mut u8, n: usize| {
                    for i in 0..n {
                        *p.add(i) = (i % 251) as u8;
                    }
                };
                fill(p, layout.size());
                for &size in &sizes[1..] {
                    let kept = layout.size().min(size);
                    p = a.realloc(p, layout, size);
                    assert!(!p.is_null());
                    assert_eq!(p as usize % align, 0, "{size} at {align}");
                    for i in 0..kept {
                        assert_eq!(*p.add(i), (i % 251) as u8, "{size} at {align}: byte {i}");
                    }
                    layout = Layout::from_size_align(size, align).unwrap();
                    fill(p, size);
                }
                a.dealloc(p, layout);
                for size in [100, 3 * LARGE_BLOCK] {
                    let l = Layout::from_size_align(size, align).unwrap();
                    let z = a.alloc_zeroed(l);
                    assert!((0..size).all(|i| *z.add(i) == 0), "{size} at {align}");
                    a.dealloc(z, l);
                }
            }
        }
    }

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
        // By message size: the long delay until a large message is read, then the short
        // one, which later small messages do not undo (one test: the option is global).
        let set = |ms: i64| if from_env { before } else { ms };
        purge_by_message_size();
        assert_eq!(purge_delay(), set(SMALL_MESSAGES_PURGE_DELAY_MS));
        message_read(LARGE_MESSAGE_BYTES - 1);
        assert_eq!(purge_delay(), set(SMALL_MESSAGES_PURGE_DELAY_MS));
        message_read(LARGE_MESSAGE_BYTES);
        assert_eq!(purge_delay(), set(PURGE_DELAY_MS));
        message_read(10);
        assert_eq!(purge_delay(), set(PURGE_DELAY_MS));
        purge_after(PURGE_DELAY_MS);
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
