//! `utility_random`.

pub(crate) mod random;
