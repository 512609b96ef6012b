//! Config loading.
