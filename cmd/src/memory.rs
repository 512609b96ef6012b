//! How the binaries ask the allocator (mimalloc) to give memory back.
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
