//! `sluice-lambda`: the Lambda bootstrap. See `sluice_cmd::lambda` and docs/lambda.md.
//!
//! Memory is what a Lambda function is billed and sized by, so the allocator is told to give
//! memory back rather than keep it for speed: freed pages are returned to the OS at once
//! (mimalloc's `purge_delay` 0; its default is a second, and a batch's worth of freed messages
//! then stays resident while the next stage allocates its own), and no transparent huge
//! pages (a 2 MiB page is resident whole however little of it is used). Measured with
//! `scripts/bench.sh lambda` (10,000 records of 1 KB): peak RSS 85–88 MiB without these,
//! ~50 MiB with them, for ~15% more invocation time (docs/performance.md).

use std::process::ExitCode;

// As in the CLI: many small allocations per message, which mimalloc serves cheaper.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (mimalloc.h, v3: the option enum's 16th member).
/// libmimalloc-sys names only some options; the test below checks this one's default.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

fn return_memory_eagerly() {
    // SAFETY: prctl(PR_SET_THP_DISABLE) takes plain integers and changes only this
    // process's huge page policy; mi_option_set takes a valid option id and a value.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
        libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0);
    }
}

fn main() -> ExitCode {
    return_memory_eagerly();
    sluice_cmd::lambda::main()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        // Its default in mimalloc v3 (1000 ms): another option at this index would differ.
        assert_eq!(
            unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) },
            1000
        );
        return_memory_eagerly();
        assert_eq!(
            unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) },
            0
        );
        assert_eq!(
            unsafe { libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) },
            1
        );
    }
}
