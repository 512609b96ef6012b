//! The environment's shutdown: what the pipeline still owes is settled on SIGTERM.
//!
//! Between invocations the pipeline holds no message: each invocation ends with its ctrl,
//! and settles its locks before it answers. What it may still owe is what a lock store that
//! kept failing left unsettled (commits of delivered messages, releases of failed ones),
//! which the lock tries again at its next call. When Lambda shuts an environment down it
//! sends the runtime SIGTERM, and gives it 500 ms before SIGKILL, but only when some
//! extension is registered. So the bootstrap registers an internal extension that
//! subscribes to no event (as lambda_runtime's `spawn_graceful_shutdown_handler` does,
//! without its panic when the Extensions API refuses the registration, as a local emulator
//! may), and on SIGTERM settles within [`SHUTDOWN_SETTLE`], logs what it could not, and
//! exits. Without the registration an external extension still makes Lambda send SIGTERM.

use std::time::{Duration, Instant};

use sluice_engine::SettleReport;

use super::Function;

/// How long the shutdown settles: inside the 500 ms Lambda gives a runtime with an internal
/// extension, with time left to log and exit.
pub const SHUTDOWN_SETTLE: Duration = Duration::from_millis(400);

/// The internal extension's name (unique within the function).
#[cfg(feature = "aws")]
const EXTENSION: &str = "sluice-shutdown";

impl Function {
    /// Settles what the pipeline still owes, within `within`: what could not be settled is
    /// logged (it stays pending until its lease ends) and returned.
    pub async fn shut_down(&self, within: Duration) -> SettleReport {
        let until = Instant::now() + within;
        let report = match tokio::time::timeout(within, self.pipeline.settle(until)).await {
            Ok(report) => report,
            Err(_) => SettleReport {
                unsettled: vec![format!(
                    "settling the locks did not end within {} ms: what they still owed stays pending until its lease ends",
                    within.as_millis()
                )],
            },
        };
        if report.is_settled() {
            tracing::info!("shutdown: nothing left to settle");
        }
        for line in &report.unsettled {
            tracing::error!(unsettled = %line, "shutdown: could not settle");
        }
        report
    }
}

/// Makes Lambda send SIGTERM at shutdown (the internal extension) and answers it: settles
/// what `function` still owes, then exits. Called during the init, before the runtime loop.
#[cfg(feature = "aws")]
pub(crate) async fn settle_on_sigterm(function: std::sync::Arc<Function>) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "SIGTERM cannot be caught: nothing is settled at shutdown");
            return;
        }
    };
    // The extension's client panics on an address that is missing or not a URI: then the
    // runtime loop reports it, as without the extension.
    let api = std::env::var("AWS_LAMBDA_RUNTIME_API").unwrap_or_default();
    if api.parse::<hyper::Uri>().is_err() {
        tracing::warn!(
            AWS_LAMBDA_RUNTIME_API = %api,
            "no runtime API to register the shutdown extension with"
        );
        return;
    }
    match lambda_extension::Extension::new()
        .with_events(&[])
        .with_extension_name(EXTENSION)
        .register()
        .await
    {
        // It receives no event: its loop only tells Lambda it is there.
        Ok(extension) => {
            tokio::spawn(async move {
                if let Err(e) = extension.run().await {
                    tracing::debug!(error = %e, "the shutdown extension's loop ended");
                }
            });
        }
        Err(e) => tracing::warn!(
            error = %e,
            "the Extensions API did not register sluice's shutdown extension: without another extension Lambda sends no SIGTERM, and what an invocation could not settle waits for its lease"
        ),
    }
    tokio::spawn(async move {
        term.recv().await;
        function.shut_down(SHUTDOWN_SETTLE).await;
        std::process::exit(0);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{HandlerKind, Options};
    use sluice_engine::{
        Message, Pipeline, StatefulTransform, Transform, TransformError, async_trait,
    };
    use std::sync::Arc;

    /// Owes what it says until told to settle; with `hangs`, its settle never ends.
    struct Owes {
        left: Vec<String>,
        hangs: bool,
    }
    #[async_trait]
    impl StatefulTransform for Owes {
        async fn transform(
            &self,
            m: Message,
            out: &mut Vec<Message>,
        ) -> Result<(), TransformError> {
            out.push(m);
            Ok(())
        }

        async fn settle(&self, _until: Instant) -> SettleReport {
            if self.hangs {
                std::future::pending::<()>().await;
            }
            SettleReport {
                unsettled: self.left.clone(),
            }
        }
    }

    fn function(left: &[&str], hangs: bool) -> Function {
        let owes = Owes {
            left: left.iter().map(|l| l.to_string()).collect(),
            hangs,
        };
        let pipeline = Pipeline::new(vec![(Arc::from("lock"), Transform::stateful(owes))]);
        let mut opts = Options::new(HandlerKind::KinesisDataStream);
        opts.metrics = None;
        Function::new(pipeline, opts)
    }

    #[tokio::test]
    async fn the_shutdown_settles_within_its_time_and_says_what_it_could_not() {
        assert!(
            function(&[], false)
                .shut_down(SHUTDOWN_SETTLE)
                .await
                .is_settled()
        );
        let left = ["transform lock: 2 lock key(s) left pending"];
        assert_eq!(
            function(&left, false)
                .shut_down(SHUTDOWN_SETTLE)
                .await
                .unsettled,
            left
        );
        let started = Instant::now();
        let report = function(&[], true)
            .shut_down(Duration::from_millis(50))
            .await;
        assert!(started.elapsed() < Duration::from_secs(5));
        assert_eq!(
            report.unsettled,
            [
                "settling the locks did not end within 50 ms: what they still owed stays pending until its lease ends"
            ]
        );
    }
}
