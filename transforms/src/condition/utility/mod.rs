//! `utility_random`.

pub mod random;
