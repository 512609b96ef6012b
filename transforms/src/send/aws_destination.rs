//! What every AWS send destination holds, once: the resource it writes to (what it is and
//! its name, as errors and logs name it), how to reach it ([`AwsTarget`]), its SDK client
//! (made on first use, so building a config never touches the network, or given by a test
//! with mocked responses) and how often records a call failed are sent again
//! ([`RetryPolicy`], used by the sends whose APIs answer per record).
//!
//! A destination (`Kinesis`, `Sqs`, ...) keeps an [`AwsDestination`] next to what is its
//! own (partition keys, FIFO ids, the queue URL, ...) and implements [`AwsSend`], which
//! gives it `with_client` and `with_retry` ([`aws_send!`] implements it). [`send_calls`] is the loop the batch sends share:
//! a batch split into calls, sent in order, and on a failed call the items not delivered.

use std::future::Future;
use std::ops::Range;

use aws_config::SdkConfig;
use sluice_engine::TransformError;
use tokio::sync::OnceCell;

pub(crate) use super::aws_records::RetryPolicy;
use super::aws_records::{PutFailure, lazy_client};
use super::batcher::SendError;
use sluice_platform::aws::AwsTarget;

/// The AWS side of a send destination: the resource, how to reach it, its client of type
/// `C`, the retry policy for failed records.
pub(crate) struct AwsDestination<C> {
    /// What the resource is, e.g. `kinesis stream`.
    kind: &'static str,
    /// Its name.
    name: String,
    /// What to do when no region is known, e.g. `give the stream's ARN in aws.arn or set
    /// AWS_REGION` (empty: nothing to say).
    no_region_hint: &'static str,
    target: AwsTarget,
    client: OnceCell<C>,
    retry: RetryPolicy,
}

impl<C> AwsDestination<C> {
    /// The `kind` named `name` (e.g. `kinesis stream`, `logs`), reached with `target`;
    /// `no_region_hint` ends the error when no region is known.
    pub(crate) fn new(
        kind: &'static str,
        name: String,
        target: AwsTarget,
        no_region_hint: &'static str,
    ) -> Self {
        AwsDestination {
            kind,
            name,
            no_region_hint,
            target,
            client: OnceCell::new(),
            retry: RetryPolicy::DEFAULT,
        }
    }

    /// What the resource is, e.g. `kinesis stream`.
    pub(crate) fn kind(&self) -> &'static str {
        self.kind
    }

    /// The resource's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// How often failed records are sent again.
    pub(crate) fn retry(&self) -> &RetryPolicy {
        &self.retry
    }

    /// The client, made with `make` from the target's configuration on first use.
    pub(crate) async fn client(
        &self,
        make: impl FnOnce(&SdkConfig) -> C,
    ) -> Result<&C, TransformError> {
        lazy_client(
            &self.client,
            &self.target,
            || {
                let Self {
                    kind,
                    name,
                    no_region_hint,
                    ..
                } = self;
                if no_region_hint.is_empty() {
                    format!("{kind} {name}: no AWS region")
                } else {
                    format!("{kind} {name}: no AWS region: {no_region_hint}")
                }
            },
            make,
        )
        .await
    }
}

/// A send destination around an [`AwsDestination`]: the builder methods every one has.
#[cfg(test)]
pub(crate) trait AwsSend: Sized {
    /// The SDK client.
    type Client;

    /// Its AWS side.
    fn aws_mut(&mut self) -> &mut AwsDestination<Self::Client>;

    /// Uses `client` instead of making one (tests with mocked responses).
    fn with_client(mut self, client: Self::Client) -> Self {
        self.aws_mut().client = OnceCell::new_with(Some(client));
        self
    }

    /// Uses `retry` for failed records.
    fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.aws_mut().retry = retry;
        self
    }
}

/// Implements [`AwsSend`] for destination `$destination`, whose [`AwsDestination`] of
/// `$client`s is its field `aws`.
macro_rules! aws_send {
    ($destination:ty, $client:ty) => {
        #[cfg(test)]
        impl $crate::send::aws_destination::AwsSend for $destination {
            type Client = $client;

            fn aws_mut(&mut self) -> &mut $crate::send::aws_destination::AwsDestination<$client> {
                &mut self.aws
            }
        }
    };
}
pub(crate) use aws_send;

/// Sends the calls `calls` of a batch of `total` items in order with `put`, which answers,
/// when a call fails, the indexes (into the call) not accepted, why, and whether they may
/// have been applied. The items of a failed call that were not accepted and every item
/// after that call (not sent, so order is kept) are the batch's undelivered items.
pub(crate) async fn send_calls<F, Fut>(
    calls: Vec<Range<usize>>,
    total: usize,
    mut put: F,
) -> Result<(), SendError>
where
    F: FnMut(Range<usize>) -> Fut,
    Fut: Future<Output = Result<(), PutFailure>>,
{
    for range in calls {
        if let Err(f) = put(range.clone()).await {
            let items: Vec<usize> = f
                .pending
                .iter()
                .map(|&i| range.start + i)
                .chain(range.end..total)
                .collect();
            return Err(SendError::items(items, f.error).uncertain(f.uncertain));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::send::batcher::Undelivered;

    fn fail(failed: Vec<usize>) -> Result<(), PutFailure> {
        Err(PutFailure {
            pending: failed,
            error: TransformError::failed("no"),
            uncertain: true,
        })
    }

    /// (calls, the call that fails and its failed indexes, the calls made, the items
    /// undelivered).
    type Case = (
        &'static [Range<usize>],
        Option<(usize, &'static [usize])>,
        usize,
        Option<&'static [usize]>,
    );

    #[tokio::test]
    async fn send_calls_table() {
        let table: &[Case] = &[
            (&[0..3, 3..5], None, 2, None),
            (&[0..3, 3..5], Some((0, &[1])), 1, Some(&[1, 3, 4])),
            (&[0..3, 3..5], Some((1, &[0, 1])), 2, Some(&[3, 4])),
            (&[0..2, 2..4, 4..6], Some((1, &[1])), 2, Some(&[3, 4, 5])),
        ];
        for (calls, failing, made, undelivered) in table {
            let mut seen = Vec::new();
            let got = send_calls(calls.to_vec(), calls.last().map_or(0, |r| r.end), |range| {
                let n = seen.len();
                seen.push(range);
                let out = match failing {
                    Some((call, failed)) if *call == n => fail(failed.to_vec()),
                    _ => Ok(()),
                };
                async move { out }
            })
            .await;
            assert_eq!(seen.len(), *made, "{calls:?} {failing:?}");
            match (got, undelivered) {
                (Ok(()), None) => {}
                (Err(e), Some(want)) => {
                    assert_eq!(
                        e.undelivered,
                        Undelivered::Items(want.to_vec()),
                        "{calls:?}"
                    );
                    assert!(e.uncertain, "the call's uncertainty is kept");
                }
                (got, want) => panic!("{calls:?} {failing:?}: {:?} vs {want:?}", got.is_ok()),
            }
        }
    }
}
