//! KPL deaggregation for the Kinesis handler: the one implementation lives in
//! `sluice_platform::kpl`, which the Kinesis send also uses to recognise its own
//! records when it reads a stream back.

pub use sluice_platform::kpl::{KplError, UserRecord, aggregate, deaggregate};
