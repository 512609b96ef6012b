//! A Kinesis endpoint that reshards as Kinesis does, for the tests that follow a reshard:
//! kinesalite (npm, installed by `scripts/emulators.sh install` into
//! `.emulators/kinesalite`), started once per test binary on a free loopback port, or the
//! endpoint in `SLUICE_TEST_KINESALITE_ENDPOINT`. moto, which the other Kinesis tests use,
//! keeps putting records into a split shard and never ends its iterator; kinesalite closes
//! the parent, routes new records to the children and ends the parent's iterator.
//!
//! It has no host flag and listens on every interface; the tests reach it on loopback.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use aws_sdk_kinesis::types::StreamStatus;

use super::emulator::{self, Emulator, Spec};

/// The endpoint URL (`http://127.0.0.1:PORT`) of a running kinesalite.
pub fn endpoint() -> String {
    static EMULATOR: OnceLock<Emulator> = OnceLock::new();
    emulator::endpoint(&EMULATOR, || Spec {
        what: "kinesalite",
        env: "SLUICE_TEST_KINESALITE_ENDPOINT",
        running: "kinesalite",
        bin: super::workspace_root().join(".emulators/kinesalite/node_modules/.bin/kinesalite"),
        // `--host` is ignored (it listens everywhere); the port is what matters.
        flags: ["--host", "--port"],
        timeout: Duration::from_secs(30),
        poll: Duration::from_millis(50),
    })
}

/// A Kinesis client for `endpoint`.
pub fn kinesis(endpoint: &str) -> aws_sdk_kinesis::Client {
    super::emulator_client!(aws_sdk_kinesis, endpoint)
}

/// Waits until stream `name` is active again (after a create or a split).
pub async fn wait_active(endpoint: &str, name: &str) {
    let c = kinesis(endpoint);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let status = c
            .describe_stream_summary()
            .stream_name(name)
            .send()
            .await
            .ok()
            .and_then(|d| {
                d.stream_description_summary()
                    .map(|s| s.stream_status().clone())
            });
        if status == Some(StreamStatus::Active) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "stream {name} not active in 20 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
