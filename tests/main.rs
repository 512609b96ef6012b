//! The integration tests, in one binary so that a build links the AWS SDK once, not once
//! per file: `sluice` run as a process, and the AWS stores and sends against the local
//! emulators that `scripts/emulators.sh` installs (each started once per test run).

// Test code: its items need not say `pub(crate)`, and it may unwrap and panic (the
// workspace's lints).
#![allow(
    unreachable_pub,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

mod common;

mod cli_aws_errors;
mod cli_build_vet;
mod cli_config_errors;
mod cli_demo;
mod cli_fmt;
mod cli_help;
mod cli_lock;
mod cli_memory;
mod cli_metrics;
mod cli_play;
mod cli_remote_config;
mod cli_run;
mod cli_stop;
mod cli_streaming;
mod cli_tap;
mod cli_test;
mod cli_vet_substation;
mod docs_commands;
mod enrich_aws_dynamodb_query;
mod examples_aws;
mod examples_hop;
mod http_secrets;
mod kv_store_dynamodb;
mod kv_store_dynamodb_epochs;
mod kv_store_items;
mod lambda_autoscale;
mod lambda_e2e;
mod lambda_errors;
mod lambda_handlers;
mod lambda_once;
mod lambda_s3;
mod lambda_template;
mod library_registry;
mod send_aws_dynamodb;
mod send_aws_eventbridge;
mod send_aws_firehose;
mod send_aws_kinesis;
mod send_aws_kinesis_readback;
mod send_aws_s3;
mod send_aws_sns;
mod send_aws_sqs;
mod send_file_locked;
mod send_gcp_storage;
