//! The Lambda handlers' event decoding: any JSON, as the event of any handler (chosen by the
//! first byte), goes through the handler with an empty pipeline and is answered or refused
//! without a panic; for the S3 handlers, whose objects would have to be read from S3, the
//! notification parsers take the JSON text instead, as does the Kinesis autoscaler's reading
//! of an alarm notification.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sluice_engine::{Pipeline, Transform};
use sluice_lambda::{Function, HandlerKind, Options, fuzzing};

const KINDS: [HandlerKind; 7] = [
    HandlerKind::KinesisDataStream,
    HandlerKind::DataFirehose,
    HandlerKind::Sqs,
    HandlerKind::Sns,
    HandlerKind::DynamodbStream,
    HandlerKind::ApiGateway,
    HandlerKind::Lambda,
];

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&choice, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let _ = fuzzing::s3_notifications(text);
    if let Ok(n) = fuzzing::alarm_notification(text) {
        let _ = fuzzing::alarm_trigger(&n);
    }
    let Ok(payload) = serde_json::from_str::<serde_json::Value>(text) else {
        return;
    };
    let mut opts = Options::new(KINDS[usize::from(choice) % KINDS.len()]);
    opts.metrics = None;
    opts.report_batch_item_failures = choice & 0x80 != 0;
    let f = Function::new(Pipeline::new(Vec::<(&str, Transform)>::new()), opts);
    let event = lambda_runtime::LambdaEvent::new(payload, lambda_runtime::Context::default());
    let _ = runtime().block_on(f.handle(event));
});
