//! KPL deaggregation for the Kinesis handler: the one implementation lives in
//! `sluice_transforms::kpl`, which the Kinesis send also uses to recognise its own
//! records when it reads a stream back.

pub use sluice_transforms::kpl::{KplError, UserRecord, aggregate, deaggregate};
