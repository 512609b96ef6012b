//! Drives a pipeline over a stream of input batches: the loop every input adapter shares.
//!
//! It applies each batch as it arrives, wakes up when a batch held by a stateful transform
//! reaches its maximum age (even when no input arrives), and sends the one ctrl message at
//! the end of input that makes every stateful transform flush.

use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use crate::error::TransformError;
use crate::message::Message;
use crate::pipeline::Pipeline;

/// Counts of one run.
#[derive(Debug, Clone, Default)]
pub struct RunStats {
    /// Data messages read.
    pub messages_in: u64,
    /// Data messages that came out of the last transform.
    pub messages_out: u64,
    /// Wall time from the first batch to the end of the final flush.
    pub elapsed: Duration,
}

/// The longest the driver waits, after the end of input, for transforms to settle what
/// they owe (the lock's commits; it bounds the wait by its lease too).
pub const SETTLE_WAIT: Duration = Duration::from_secs(600);

/// Runs `pipeline` over the batches received from `input` until it closes, then sends a
/// ctrl. `on_output` gets what comes out of the last transform. When a transform fails,
/// what the pipeline holds is discarded ([`Pipeline::abort`]) and the error is returned.
/// Either way the pipeline settles ([`Pipeline::settle`]) before this returns.
pub async fn drive(
    pipeline: &Pipeline,
    mut input: mpsc::Receiver<Vec<Message>>,
    on_output: impl FnMut(Vec<Message>),
) -> Result<RunStats, TransformError> {
    let r = drive_inner(pipeline, &mut input, on_output).await;
    if let Err(e) = &r {
        let reason = e.to_string();
        pipeline.abort(&reason).await;
        // What was read and never processed was not delivered either.
        input.close();
        while let Ok(batch) = input.try_recv() {
            for m in &batch {
                m.fail_acks(&reason);
            }
        }
    }
    pipeline.settle(Instant::now() + SETTLE_WAIT).await;
    r
}

async fn drive_inner(
    pipeline: &Pipeline,
    input: &mut mpsc::Receiver<Vec<Message>>,
    mut on_output: impl FnMut(Vec<Message>),
) -> Result<RunStats, TransformError> {
    let start = Instant::now();
    let mut stats = RunStats::default();
    let mut count_out = |out: Vec<Message>, stats: &mut RunStats| {
        stats.messages_out += out.iter().filter(|m| !m.is_ctrl()).count() as u64;
        on_output(out);
    };
    loop {
        if let Some(d) = pipeline.deadline() {
            let now = Instant::now();
            if d <= now {
                let out = pipeline.expire(now).await?;
                count_out(out, &mut stats);
                continue;
            }
        }
        let deadline = pipeline.deadline();
        let batch = match deadline {
            Some(d) => {
                tokio::select! {
                    b = input.recv() => b,
                    _ = tokio::time::sleep_until(d.into()) => continue,
                }
            }
            None => input.recv().await,
        };
        let Some(batch) = batch else { break };
        stats.messages_in += batch.iter().filter(|m| !m.is_ctrl()).count() as u64;
        let out = pipeline.apply(batch).await?;
        count_out(out, &mut stats);
    }
    let out = pipeline.apply(vec![Message::ctrl()]).await?;
    count_out(out, &mut stats);
    stats.elapsed = start.elapsed();
    Ok(stats)
}
