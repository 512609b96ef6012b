//! The Lambda function: a sluice config run over AWS event sources.
//!
//! A crate of its own because it is a product of its own: the `sluice` CLI needs none of
//! its handlers, its runtime loop or its autoscaler, so `sluice-cmd` is the CLI and this
//! crate is the function. It depends on nothing of the CLI's: what both read (configs at
//! URLs, lock warnings, compressed input) is in `sluice_config` and `sluice_transforms`.
//! The `sluice-lambda` binary is a shim in `sluice-cmd` that sets the allocator up and calls
//! [`main`] (`sluice tap` also reads Kinesis records as [`kinesis`] does); `fuzz/` builds the
//! handlers without the `aws` feature.
//!
//! At a cold start [`main`] loads the config named by `SLUICE_CONFIG` (a path in the
//! deployment package, `s3://bucket/key`, or an `https://` URL; `http://` only to loopback,
//! e.g. the AppConfig extension on `localhost:2772`) and builds the pipeline once; a bad
//! config ends the init with one log line naming the problem. The handler is chosen by
//! `SLUICE_LAMBDA_HANDLER` (or `SUBSTATION_LAMBDA_HANDLER`) with Substation's values.
//!
//! Each invocation turns the event's records into messages (one module per event source
//! family, each setting the metadata Substation's handler sets, per record), attaches one
//! acknowledgement tracker per source record, runs them through the pipeline and ends with
//! one ctrl message. The response is built after that ctrl returned: from the trackers the
//! handler knows which records were delivered (`batchItemFailures`, Firehose's per-record
//! results) and, for API Gateway and plain invokes, what came out of the pipeline. A failed
//! invocation is a [`HandlerError`]: the runtime API gets a short, stable `errorType`
//! (`InvalidEvent`, `DeliveryFailed`, ...) and a one-line message.
//!
//! Invocations run one at a time (the pipeline's batches and the ctrl are shared state);
//! within one, stateless transforms run on `concurrency` workers (the config's
//! `concurrency`, else the number of CPUs Lambda gives the function).
//!
//! One handler runs no pipeline: `AWS_KINESIS_AUTOSCALE` ([`autoscale`]) resizes Kinesis
//! streams when their CloudWatch alarms fire, and needs no `SLUICE_CONFIG`.

mod answers;
mod api;
pub mod autoscale;
mod bootstrap;
mod dynamodb;
mod error;
mod event;
mod firehose;
pub mod kinesis;
pub mod kpl;
mod s3;
mod shutdown;
mod sns;
mod sqs;
pub mod telemetry;

pub use bootstrap::{handler_from_env, load, main, options_from_env};
pub use error::HandlerError;
pub use event::Event;
pub(crate) use event::{base64_or_reason, message, parse_event};
pub use shutdown::SHUTDOWN_SETTLE;

/// Entry points for the fuzz targets (`fuzz/`): the S3 notification parsers, which the
/// handlers reach only after a notification names an object to read, and the autoscaler's
/// reading of a CloudWatch alarm notification (its handler needs AWS clients).
#[doc(hidden)]
pub mod fuzzing {
    pub use super::autoscale::{
        parse_notification as alarm_notification, trigger as alarm_trigger,
    };
    pub use super::s3::notification_counts as s3_notifications;
}

use std::collections::HashMap;
use std::time::{Duration, Instant};

use lambda_runtime::LambdaEvent;
use serde_json::Value;
use sluice_engine::Message;
use sluice_engine::ack::{AckStatus, AckTracker};
use sluice_engine::driver::{self, SettleDeadline};
use sluice_engine::{OutputsReach, Pipeline};
use tracing::Instrument;

/// The event sources, by Substation's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandlerKind {
    /// `AWS_KINESIS_DATA_STREAM`: a Kinesis event source mapping (KPL records deaggregated).
    KinesisDataStream,
    /// `AWS_DATA_FIREHOSE`: a Firehose data transformation.
    DataFirehose,
    /// `AWS_SQS`: an SQS event source mapping.
    Sqs,
    /// `AWS_SNS`: an SNS subscription.
    Sns,
    /// `AWS_S3`: S3 event notifications; each object is read.
    S3,
    /// `AWS_S3_SNS`: S3 event notifications delivered through SNS.
    S3Sns,
    /// `AWS_S3_SQS`: S3 event notifications delivered through SQS (or SNS, then SQS).
    S3Sqs,
    /// `AWS_DYNAMODB_STREAM`: a DynamoDB stream event source mapping.
    DynamodbStream,
    /// `AWS_API_GATEWAY`: an API Gateway (REST, proxy integration) request.
    ApiGateway,
    /// `AWS_LAMBDA`: a plain invoke; the event is the message.
    Lambda,
    /// `AWS_KINESIS_AUTOSCALE`: CloudWatch alarms through SNS resize Kinesis streams
    /// ([`autoscale`]); no pipeline.
    KinesisAutoscale,
}

const KINDS: [(&str, HandlerKind); 11] = [
    ("AWS_KINESIS_DATA_STREAM", HandlerKind::KinesisDataStream),
    ("AWS_DATA_FIREHOSE", HandlerKind::DataFirehose),
    ("AWS_SQS", HandlerKind::Sqs),
    ("AWS_SNS", HandlerKind::Sns),
    ("AWS_S3", HandlerKind::S3),
    ("AWS_S3_SNS", HandlerKind::S3Sns),
    ("AWS_S3_SQS", HandlerKind::S3Sqs),
    ("AWS_DYNAMODB_STREAM", HandlerKind::DynamodbStream),
    ("AWS_API_GATEWAY", HandlerKind::ApiGateway),
    ("AWS_LAMBDA", HandlerKind::Lambda),
    ("AWS_KINESIS_AUTOSCALE", HandlerKind::KinesisAutoscale),
];

impl HandlerKind {
    /// Parses a handler name; Substation v1's names (`AWS_KINESIS`, `AWS_DYNAMODB`,
    /// `AWS_KINESIS_DATA_FIREHOSE`) are accepted too.
    pub fn parse(name: &str) -> Result<HandlerKind, String> {
        let name = name.trim();
        let alias = match name {
            "AWS_KINESIS" => "AWS_KINESIS_DATA_STREAM",
            "AWS_DYNAMODB" => "AWS_DYNAMODB_STREAM",
            "AWS_KINESIS_DATA_FIREHOSE" => "AWS_DATA_FIREHOSE",
            other => other,
        };
        KINDS
            .iter()
            .find(|(n, _)| *n == alias)
            .map(|(_, k)| *k)
            .ok_or_else(|| {
                let names: Vec<&str> = KINDS.iter().map(|(n, _)| *n).collect();
                format!(
                    "unknown handler {name:?}; expected one of {}",
                    names.join(", ")
                )
            })
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        KINDS
            .iter()
            .find(|(_, k)| *k == self)
            .map(|(n, _)| *n)
            .unwrap_or("?")
    }
}

/// How the function behaves, beyond its pipeline.
#[derive(Debug, Clone)]
pub struct Options {
    /// The event source.
    pub kind: HandlerKind,
    /// The event source mapping has `ReportBatchItemFailures` (Kinesis, SQS, DynamoDB
    /// streams): answer the undelivered records in `batchItemFailures`. Without it, any
    /// undelivered record fails the invocation (the whole batch is retried), because a
    /// mapping without the setting ignores `batchItemFailures` and would lose them.
    pub report_batch_item_failures: bool,
    /// The largest S3 object read (`AWS_S3*`), in bytes.
    pub max_object_bytes: usize,
    /// Where EMF metric lines go (`None`: not written).
    pub metrics: Option<telemetry::MetricsSink>,
    /// The function's name, a dimension of the metrics.
    pub function_name: String,
    /// The most bytes of message data put through the pipeline at once (`SLUICE_BATCH_BYTES`):
    /// an event's messages go through in pieces of this size, in order.
    pub feed_bytes: usize,
}

/// The default of [`Options::feed_bytes`], as `sluice run --batch-bytes`: 1 MiB.
pub const DEFAULT_FEED_BYTES: usize = 1 << 20;

impl Options {
    /// Options for `kind` with the defaults: no partial batch responses, 1 GiB objects,
    /// metrics to stdout, pieces of 1 MiB.
    pub fn new(kind: HandlerKind) -> Options {
        Options {
            kind,
            report_batch_item_failures: false,
            max_object_bytes: 1 << 30,
            metrics: Some(telemetry::MetricsSink::Stdout),
            function_name: String::new(),
            feed_bytes: DEFAULT_FEED_BYTES,
        }
    }
}

/// A loaded function: the pipeline built once, and how to answer its events.
pub struct Function {
    pipeline: Pipeline,
    opts: Options,
    // One invocation at a time: batches held by stateful transforms and the ctrl that
    // flushes them belong to one invocation.
    gate: tokio::sync::Mutex<()>,
}

/// What one source record became.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// Every message of the record was delivered or deliberately dropped.
    Delivered,
    /// Some message was not delivered; why.
    Failed(String),
}

/// The result of running one invocation's records.
pub(crate) struct Run {
    /// One per source record, in order.
    pub deliveries: Vec<Delivery>,
    /// What came out of the last transform, with the index of the record it came from
    /// (the first record among its acknowledgements), in output order.
    pub outputs: Vec<(Option<usize>, bytes::Bytes)>,
    /// The pipeline's error, if one escaped it.
    pub error: Option<String>,
}

/// Whether a record the pipeline fails fails alone and the others go on (as lines do under
/// `sluice run`), rather than failing every record after it: where the source resolves each
/// record on its own and retries none (Firehose's per-record results: a failed record goes
/// to the error output). Sources that redeliver from the first failure in order (Kinesis,
/// DynamoDB Streams), SQS (a FIFO queue keeps order; a standard one retries the batch
/// without `ReportBatchItemFailures`) and S3 objects (a record is a whole object) stop at
/// the first error, so that what follows it is not delivered only to come again.
fn fails_alone(kind: HandlerKind) -> bool {
    kind == HandlerKind::DataFirehose
}

/// `msgs` cut in order into pieces of at most `bytes` of data (a longer message alone).
fn pieces(msgs: impl Iterator<Item = Message>, bytes: usize) -> Vec<Vec<Message>> {
    let mut all = Vec::new();
    let mut piece: Vec<Message> = Vec::new();
    let mut size = 0usize;
    for m in msgs {
        let n = m.data().len();
        if !piece.is_empty() && size + n > bytes {
            all.push(std::mem::take(&mut piece));
            size = 0;
        }
        size += n;
        piece.push(m);
    }
    if !piece.is_empty() {
        all.push(piece);
    }
    all
}

impl Function {
    /// A function over `pipeline`.
    pub fn new(pipeline: Pipeline, opts: Options) -> Function {
        // Stream and queue handlers answer with which records failed, not with what came
        // out: a record is resolved by its sends alone, as soon as they delivered it.
        // The others answer with what came out: a lock among them commits a key once its
        // own sends delivered, since a retried call gets the same answer (answers.rs).
        pipeline.outputs_reach(if answers::answers_with_output(opts.kind) {
            OutputsReach::Answer
        } else {
            OutputsReach::Nowhere
        });
        let pipeline = if fails_alone(opts.kind) {
            pipeline.failing_messages_alone()
        } else {
            pipeline
        };
        Function {
            pipeline,
            opts,
            gate: tokio::sync::Mutex::new(()),
        }
    }

    /// The options it runs with.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// Handles one invocation: the response, or a function error (the source retries).
    pub async fn handle(&self, event: LambdaEvent<Value>) -> Result<Value, HandlerError> {
        self.handle_event(LambdaEvent::new(Event::Json(event.payload), event.context))
            .await
    }

    /// [`Function::handle`] for an event parsed by [`Event`]'s deserializer.
    ///
    /// The invocation runs inside its deadline (`sluice_engine::invocation`): a lock that
    /// has no `lease` of its own protects its keys exactly until the invocation ends.
    pub async fn handle_event(&self, event: LambdaEvent<Event>) -> Result<Value, HandlerError> {
        let request_id = event.context.request_id.clone();
        let span = tracing::info_span!("invocation", request_id = %request_id);
        let deadline = deadline_instant(event.context.deadline);
        let work = async {
            let _one = self.gate.lock().await;
            let r = match event.payload {
                Event::Kinesis(e) => kinesis::handle_event(self, e).await,
                Event::Json(p) => self.handle_json(p).await,
                Event::Invalid(why) => Err(HandlerError::invalid_event(self.opts.kind, why)),
            };
            // The one log line of a failed invocation: lambda_runtime's copy of it is not
            // written (telemetry::init_logs).
            if let Err(e) = &r {
                tracing::error!(error_type = e.kind(), error = %e, "invocation failed");
            }
            r
        };
        match deadline {
            Some(d) => {
                sluice_engine::invocation::with_deadline(d, work)
                    .instrument(span)
                    .await
            }
            None => work.instrument(span).await,
        }
    }

    /// Runs the handler for an event given as JSON.
    async fn handle_json(&self, p: Value) -> Result<Value, HandlerError> {
        match self.opts.kind {
            HandlerKind::KinesisDataStream => kinesis::handle(self, p).await,
            HandlerKind::DataFirehose => firehose::handle(self, p).await,
            HandlerKind::Sqs => sqs::handle(self, p).await,
            HandlerKind::Sns => sns::handle(self, p).await,
            HandlerKind::S3 | HandlerKind::S3Sns | HandlerKind::S3Sqs => s3::handle(self, p).await,
            HandlerKind::DynamodbStream => dynamodb::handle(self, p).await,
            HandlerKind::ApiGateway => api::handle_gateway(self, p).await,
            HandlerKind::Lambda => api::handle_invoke(self, p).await,
            // Its bootstrap is autoscale::main, which builds no Function.
            HandlerKind::KinesisAutoscale => Err(HandlerError::ConfigError(format!(
                "{} runs no pipeline: it is served by lambda::autoscale, not a Function",
                self.opts.kind.name()
            ))),
        }
    }

    /// Runs `records` (the messages of each source record) through the pipeline and one
    /// ctrl, and reports what became of each record. Writes the invocation's metrics.
    pub(crate) async fn run(&self, records: Vec<Vec<Message>>, keep: bool) -> Run {
        self.run_records(records.into_iter().map(Ok).collect(), keep)
            .await
    }

    /// [`Function::run`] where a record may be one that could not be read (`Err`, why): it
    /// fails alone, with that reason, and counts as failed in the metrics (the handler,
    /// which knows its id, logs it).
    pub(crate) async fn run_records(
        &self,
        records: Vec<Result<Vec<Message>, String>>,
        keep: bool,
    ) -> Run {
        let mut trackers = Vec::with_capacity(records.len());
        let mut index_of: HashMap<usize, usize> = HashMap::new();
        let mut metrics = telemetry::Metrics {
            records_in: records.len() as u64,
            ..Default::default()
        };
        let mut tagged = Vec::with_capacity(records.len());
        for (i, record) in records.into_iter().enumerate() {
            let (tracker, token) = AckTracker::new();
            if keep {
                index_of.insert(tracker.id(), i);
            }
            trackers.push(tracker);
            let msgs = match record {
                Ok(msgs) => msgs,
                Err(why) => {
                    token.fail(&why);
                    Vec::new()
                }
            };
            let msgs: Vec<Message> = msgs
                .into_iter()
                .map(|mut m| {
                    m.add_ack(token.clone());
                    m
                })
                .collect();
            metrics.messages_in += msgs.len() as u64;
            tagged.push(msgs);
        }
        // What comes out of the last transform: kept only when the handler answers with it
        // (so a batch's outputs are freed as it is done otherwise).
        let mut outputs: Vec<Message> = Vec::new();
        let mut messages_out = 0u64;
        let take = |out: Vec<Message>| {
            let data = out.into_iter().filter(|m| !m.is_ctrl());
            if keep {
                let before = outputs.len();
                outputs.extend(data);
                messages_out += (outputs.len() - before) as u64;
            } else {
                messages_out += data.count() as u64;
            }
        };
        // The records go to the driver that every adapter shares (it owns the ctrl, the
        // abort after an error, the settle), in pieces of at most `feed_bytes` of data, in
        // order, as `sluice run` feeds its lines: a piece's parsed documents are held
        // together, so memory is bounded by a few pieces, not by the event. With several
        // workers the stateless lead of the next pieces runs while the send works on one.
        // After an error the rest is not sent, and fails with it, unless records fail alone
        // ([`fails_alone`]).
        let pieces = if fails_alone(self.opts.kind) {
            // A record per batch: what a record made comes out with it, so a run that stops
            // (failures in a row) cannot take the outputs of records delivered before it in
            // the same batch with it.
            tagged.into_iter().filter(|msgs| !msgs.is_empty()).collect()
        } else {
            pieces(tagged.into_iter().flatten(), self.opts.feed_bytes)
        };
        // The keys of what was delivered are committed (and of what failed given back)
        // before the function answers: a frozen container commits nothing, and a record
        // reported delivered must not be taken over and processed again. This also settles
        // the copies of a message that arrived twice, which share its fate.
        // Its calls may go on after the work had to stop, until the answer is due
        // (`invocation::settling`, in the driver); past that, what is left is left (a store
        // call the lock's own task holds can hold its lane longer).
        let settle_by = match sluice_engine::invocation::answer_by() {
            Some(at) => {
                let by = SettleDeadline::default();
                by.bring_forward(at);
                by
            }
            None => SettleDeadline::waiting(SETTLE_MARGIN),
        };
        let started = Instant::now();
        let (result, settled) =
            driver::drive_all_within(&self.pipeline, pieces, &settle_by, take).await;
        let error = result.as_ref().err().map(|e| e.to_string());
        metrics.flush = match &result {
            Ok(stats) => stats.flush,
            // The flush is not told apart from the work when the run ended in an error.
            Err(_) => started.elapsed(),
        };
        metrics.messages_out = messages_out;
        let outputs: Vec<(Option<usize>, bytes::Bytes)> = if keep {
            outputs
                .into_iter()
                .map(|m| {
                    let idx = m
                        .acks()
                        .iter()
                        .filter_map(|a| index_of.get(&a.tracker_id()?).copied())
                        .min();
                    (idx, m.data().clone())
                })
                .collect()
        } else {
            drop(outputs);
            Vec::new()
        };
        // What it could not settle stays owed, tried again at the next invocation and at the
        // shutdown; each line says what it means for the records.
        for line in settled.unsettled {
            tracing::error!("{line}");
        }
        let deliveries: Vec<Delivery> = trackers
            .iter()
            .map(|t| match t.status() {
                AckStatus::Delivered => Delivery::Delivered,
                AckStatus::Failed => Delivery::Failed(
                    t.failure_reason()
                        .or_else(|| error.clone())
                        .unwrap_or_else(|| "not delivered".into()),
                ),
                AckStatus::Pending => Delivery::Failed("still held after the flush".into()),
            })
            .collect();
        metrics.records_failed = deliveries
            .iter()
            .filter(|d| matches!(d, Delivery::Failed(_)))
            .count() as u64;
        metrics.duplicates = self
            .pipeline
            .context()
            .telemetry()
            .take("duplicates_skipped"); // meta_kv_store_lock's counter
        if let Some(sink) = &self.opts.metrics {
            telemetry::write(
                sink,
                &metrics,
                &self.opts.function_name,
                self.opts.kind.name(),
            );
        }
        tracing::info!(
            records_in = metrics.records_in,
            messages_in = metrics.messages_in,
            messages_out = metrics.messages_out,
            records_failed = metrics.records_failed,
            flush_ms = metrics.flush.as_secs_f64() * 1e3,
            "invocation done"
        );
        Run {
            deliveries,
            outputs,
            error,
        }
    }

    /// The response of a stream or queue handler: `batchItemFailures` naming the
    /// undelivered records (`ids[i]` is record `i`'s identifier), or, without
    /// `ReportBatchItemFailures`, a function error when any record failed.
    pub(crate) fn batch_response(&self, run: &Run, ids: &[String]) -> Result<Value, HandlerError> {
        let failed: Vec<(usize, &str)> = run
            .deliveries
            .iter()
            .enumerate()
            .filter_map(|(i, d)| match d {
                Delivery::Failed(why) => Some((i, why.as_str())),
                Delivery::Delivered => None,
            })
            .collect();
        if failed.is_empty() {
            return Ok(serde_json::json!({ "batchItemFailures": [] }));
        }
        let first = failed[0].1;
        if !self.opts.report_batch_item_failures {
            return Err(HandlerError::DeliveryFailed(format!(
                "{} of {} records were not delivered (first: {first}); the batch will be retried",
                failed.len(),
                ids.len()
            )));
        }
        tracing::warn!(
            failed = failed.len(),
            records = ids.len(),
            first = %first,
            "records not delivered are reported in batchItemFailures"
        );
        let items: Vec<Value> = failed
            .iter()
            .map(|(i, _)| serde_json::json!({ "itemIdentifier": ids[*i] }))
            .collect();
        Ok(serde_json::json!({ "batchItemFailures": items }))
    }
}

/// How long the settling before the answer may take outside an invocation with a deadline
/// (inside one: until `sluice_engine::invocation::answer_by`, 0.5 s before it).
const SETTLE_MARGIN: Duration = sluice_engine::invocation::ANSWER_MARGIN;

/// The invocation's deadline (epoch milliseconds, as the runtime API gives it) as an
/// instant; `None` when the runtime gave none (0) or it is nonsense: further than Lambda's
/// 15 minutes, or long past (cargo-lambda's emulator sends its timeout, `600000`, where the
/// deadline goes; a work bounded by a deadline in 1970 would make no call at all). A
/// deadline a little past (a slow clock, a late event) is now.
fn deadline_instant(deadline_ms: u64) -> Option<Instant> {
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_millis() as u64;
    deadline_instant_at(deadline_ms, now_ms)
}

/// [`deadline_instant`] with the time now given (epoch milliseconds).
fn deadline_instant_at(deadline_ms: u64, now_ms: u64) -> Option<Instant> {
    const LONG_PAST: u64 = 60 * 60 * 1000;
    if deadline_ms == 0 || deadline_ms.saturating_add(LONG_PAST) < now_ms {
        return None;
    }
    let left = Duration::from_millis(deadline_ms.saturating_sub(now_ms));
    (left <= Duration::from_secs(15 * 60 + 60)).then(|| Instant::now() + left)
}

/// Milliseconds since the epoch, now.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_millis() as i64
}

#[cfg(test)]
mod tests;
