//! KPL deaggregation for the Kinesis handler: the one implementation lives in
//! `sluice_transforms::aws::kpl`, which the Kinesis send also uses to recognise its own
//! records when it reads a stream back.

pub use sluice_transforms::aws::kpl::{KplError, UserRecord, aggregate, deaggregate};
