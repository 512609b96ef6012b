//! The forwarding base of stateful transforms that wrap transform lists (the meta
//! transforms: routing, iteration, error handling, retries, timing, the lock).
//!
//! Most of a [`StatefulTransform`]'s methods are about what it holds: its deadline, expiring,
//! aborting, giving up, settling, where its outputs reach, whether it fails alone or waits on
//! others. A wrapper holds what its inner lists hold, so it passes each of them on. A
//! [`Wrapper`] says which lists it wraps, and each method passes itself on to them by
//! default: a wrapper overrides only what it changes (as each of tower's layers adds one
//! behaviour). Every `Wrapper` is a [`StatefulTransform`] (or, built with
//! [`crate::Transform::stateful_if`], a stateless one around stateless lists).

use std::time::Instant;

use async_trait::async_trait;

use crate::error::TransformError;
use crate::message::Message;
use crate::pipeline::Pipeline;
use crate::transform::{OutputsReach, SettleReport, StatefulTransform, transform_each};

/// A stateful transform around transform lists, whose methods pass on to those lists unless
/// it overrides them. Each method is the [`StatefulTransform`] method of the same name.
#[async_trait]
pub trait Wrapper: Send + Sync + Sized + 'static {
    /// The lists it wraps, in order.
    fn wraps(&self) -> &[Pipeline];

    /// See [`StatefulTransform::transform`].
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError>;

    /// See [`StatefulTransform::transform_batch`]; by default, each message in turn.
    async fn transform_batch(
        &self,
        msgs: Vec<Message>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        transform_each(self, msgs, out).await
    }

    /// See [`StatefulTransform::deadline`]; by default, the earliest of its lists'.
    fn deadline(&self) -> Option<Instant> {
        self.wraps().iter().filter_map(Pipeline::deadline).min()
    }

    /// See [`StatefulTransform::expire`]; by default, each list's expired batches, in turn,
    /// and what they emit comes out.
    async fn expire(&self, now: Instant, out: &mut Vec<Message>) -> Result<(), TransformError> {
        for p in self.wraps() {
            out.extend(p.expire(now).await?);
        }
        Ok(())
    }

    /// See [`StatefulTransform::abort`]; by default, passed to each list.
    async fn abort(&self, reason: &str) {
        for p in self.wraps() {
            p.abort(reason).await;
        }
    }

    /// See [`StatefulTransform::give_up`]; by default, passed to each list.
    async fn give_up(&self, reason: &str) {
        for p in self.wraps() {
            p.give_up(reason).await;
        }
    }

    /// See [`StatefulTransform::settle`]; by default, each list's, reported together.
    async fn settle(&self, until: Instant) -> SettleReport {
        let mut report = SettleReport::default();
        for p in self.wraps() {
            report.extend(p.settle(until).await);
        }
        report
    }

    /// See [`StatefulTransform::outputs_reach`]; by default, passed to each list (what
    /// leaves a list leaves the wrapper).
    fn outputs_reach(&self, reach: OutputsReach) {
        for p in self.wraps() {
            p.outputs_reach(reach);
        }
    }

    /// See [`StatefulTransform::fails_alone`]; by default, passed to each list (a wrapper
    /// that acts on its lists' errors keeps it).
    fn fails_alone(&self) {
        for p in self.wraps() {
            p.fail_alone();
        }
    }

    /// See [`StatefulTransform::waits_on_others`]; by default, whether any list does.
    fn waits_on_others(&self) -> bool {
        self.wraps().iter().any(Pipeline::waits_on_others)
    }
}

#[async_trait]
impl<W: Wrapper> StatefulTransform for W {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        Wrapper::transform(self, msg, out).await
    }

    async fn transform_batch(
        &self,
        msgs: Vec<Message>,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        Wrapper::transform_batch(self, msgs, out).await
    }

    fn deadline(&self) -> Option<Instant> {
        Wrapper::deadline(self)
    }

    async fn expire(&self, now: Instant, out: &mut Vec<Message>) -> Result<(), TransformError> {
        Wrapper::expire(self, now, out).await
    }

    async fn abort(&self, reason: &str) {
        Wrapper::abort(self, reason).await;
    }

    async fn give_up(&self, reason: &str) {
        Wrapper::give_up(self, reason).await;
    }

    async fn settle(&self, until: Instant) -> SettleReport {
        Wrapper::settle(self, until).await
    }

    fn outputs_reach(&self, reach: OutputsReach) {
        Wrapper::outputs_reach(self, reach);
    }

    fn fails_alone(&self) {
        Wrapper::fails_alone(self);
    }

    fn waits_on_others(&self) -> bool {
        Wrapper::waits_on_others(self)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use super::*;
    use crate::Transform;

    /// Notes which of its methods were called; holds a batch due at `due`.
    struct Noting {
        seen: Arc<Mutex<Vec<&'static str>>>,
        due: Instant,
    }

    #[async_trait]
    impl StatefulTransform for Noting {
        async fn transform(
            &self,
            m: Message,
            out: &mut Vec<Message>,
        ) -> Result<(), TransformError> {
            out.push(m);
            Ok(())
        }
        fn deadline(&self) -> Option<Instant> {
            Some(self.due)
        }
        async fn abort(&self, _: &str) {
            self.seen.lock().unwrap().push("abort");
        }
        async fn give_up(&self, _: &str) {
            self.seen.lock().unwrap().push("give_up");
        }
        async fn settle(&self, _: Instant) -> SettleReport {
            SettleReport {
                unsettled: vec!["owes".into()],
            }
        }
        fn fails_alone(&self) {
            self.seen.lock().unwrap().push("fails_alone");
        }
        fn waits_on_others(&self) -> bool {
            true
        }
    }

    /// Wraps two lists and overrides only `give_up`, which it keeps.
    struct Around(Vec<Pipeline>);

    #[async_trait]
    impl Wrapper for Around {
        fn wraps(&self) -> &[Pipeline] {
            &self.0
        }
        async fn transform(
            &self,
            m: Message,
            out: &mut Vec<Message>,
        ) -> Result<(), TransformError> {
            out.extend(self.0[0].apply(vec![m]).await?);
            Ok(())
        }
        async fn give_up(&self, _: &str) {}
    }

    #[tokio::test]
    async fn what_a_wrapper_does_not_override_passes_to_every_list() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let now = Instant::now();
        let list = |due| {
            let t = Noting {
                seen: seen.clone(),
                due,
            };
            Pipeline::new(vec![("n", Transform::stateful(t))])
        };
        let later = now + Duration::from_secs(9);
        let w = Around(vec![list(later), list(now)]);
        assert_eq!(StatefulTransform::deadline(&w), Some(now), "the earliest");
        assert!(StatefulTransform::waits_on_others(&w));
        StatefulTransform::abort(&w, "why").await;
        StatefulTransform::give_up(&w, "why").await;
        StatefulTransform::fails_alone(&w);
        let report = StatefulTransform::settle(&w, now).await;
        assert_eq!(report.unsettled, ["owes", "owes"]);
        assert_eq!(
            *seen.lock().unwrap(),
            ["abort", "abort", "fails_alone", "fails_alone"],
            "give_up is overridden"
        );
        let mut out = Vec::new();
        StatefulTransform::transform(&w, Message::new(&b"x"[..]), &mut out)
            .await
            .unwrap();
        assert_eq!(&out[0].data()[..], b"x");
    }
}
