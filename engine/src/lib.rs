//! # sluice-engine
//!
//! The core of sluice, with no AWS and no Jsonnet in it: the [`Message`] (data, metadata,
//! ctrl), the path language ([`path`]), the [`Transform`] and [`Condition`] traits, the
//! [`Registry`] that builds them from `{type, settings}` in a [`Context`] (state files,
//! shared store instances, [`telemetry`], the clock), [`Pipeline`] execution with
//! ctrl-message flushing, bounded concurrency and kept order, batching ([`batch`]) and
//! acknowledgements ([`ack`]).
//!
//! A message's path through the engine: an input adapter (the CLI, the Lambda function)
//! makes [`Message`]s (or, for lines, [`input::BufferedLines`] that the workers make into
//! messages) and hands batches of them to [`driver::drive`], which applies the
//! [`Pipeline`] and ends the input with one ctrl message; the transforms (built by the
//! `sluice-transforms` crate through the [`Registry`]) change, route, batch and send them;
//! sends resolve each message's [`ack::AckToken`]s; the adapter reads its
//! [`ack::AckTracker`]s to report to the source.

pub mod ack;
pub mod batch;
pub mod context;
pub mod driver;
pub mod error;
pub mod go_regex;
pub mod input;
pub mod invocation;
pub mod json;
pub mod message;
pub mod name;
pub mod path;
pub mod pipeline;
pub mod registry;
pub mod settings;
pub mod telemetry;
pub mod testing;
pub mod transform;
pub mod type_info;
pub mod value;
pub mod wrapper;

pub use context::Context;
pub use error::{ConfigError, ConfigWarning, FAILURES_IN_A_ROW_TO_STOP, TransformError};
pub use message::{Body, Key, Message};
pub use name::TransformName;
pub use pipeline::Pipeline;
pub use registry::{Build, Registry};
pub use transform::{
    Compute, Condition, InPlace, LineSink, MapPlan, MapTransform, OutputsReach, SettleReport,
    StatefulTransform, StatelessTransform, Transform,
};
pub use type_info::{Reach, TypeInfo};
pub use wrapper::Wrapper;

pub use async_trait::async_trait;
pub use json::{Map, Number, Value};
