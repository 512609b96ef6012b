//! The `send` family: transforms whose side effect is delivering batches somewhere. Every
//! send is a [`batcher::Sender`] around a [`batcher::Destination`]; data passes through.

#[cfg(feature = "aws")]
pub(crate) mod aws_data_firehose;
#[cfg(feature = "aws")]
pub(crate) mod aws_destination;
#[cfg(feature = "aws")]
pub(crate) mod aws_dynamodb_put;
#[cfg(feature = "aws")]
pub(crate) mod aws_eventbridge;
#[cfg(feature = "aws")]
pub(crate) mod aws_kinesis_data_stream;
#[cfg(feature = "aws")]
pub(crate) mod aws_lambda;
#[cfg(feature = "aws")]
pub(crate) mod aws_messages;
#[cfg(feature = "aws")]
mod aws_records;
#[cfg(feature = "aws")]
pub(crate) mod aws_s3;
#[cfg(feature = "aws")]
pub(crate) mod aws_sns;
#[cfg(feature = "aws")]
pub(crate) mod aws_sqs;
pub(crate) mod batcher;
pub(crate) mod data_path;
pub(crate) mod file;
pub(crate) mod gcp_storage;
pub(crate) mod http_post;
pub(crate) mod object_per_batch;
pub(crate) mod stdout;

use sluice_engine::Registry;

/// Registers the family.
pub(crate) fn register(r: &mut Registry) {
    #[cfg(feature = "aws")]
    register_aws(r);
    r.stateful("send_file", file::SendFile::build);
    r.stateful("send_gcp_storage", gcp_storage::SendGcpStorage::build);
    r.stateful("send_http_post", http_post::SendHttpPost::build);
    r.transform("send_stdout", |b| {
        stdout::SendStdout::build(b).map(stdout::SendStdout::into_transform)
    });
}

#[cfg(feature = "aws")]
fn register_aws(r: &mut Registry) {
    r.stateful(
        "send_aws_data_firehose",
        aws_data_firehose::SendAwsDataFirehose::build,
    );
    r.stateful(
        "send_aws_dynamodb_put",
        aws_dynamodb_put::SendAwsDynamodbPut::build,
    );
    r.stateful(
        "send_aws_eventbridge",
        aws_eventbridge::SendAwsEventbridge::build,
    );
    r.stateful(
        "send_aws_kinesis_data_stream",
        aws_kinesis_data_stream::SendAwsKinesisDataStream::build,
    );
    r.stateful("send_aws_sns", aws_sns::SendAwsSns::build);
    r.stateful("send_aws_sqs", aws_sqs::SendAwsSqs::build);
    r.stateful("send_aws_s3", aws_s3::SendAwsS3::build);
    r.stateful("send_aws_lambda", aws_lambda::SendAwsLambda::build);
}
