//! The `send` family: transforms whose side effect is delivering batches somewhere. Every
//! send is a [`batcher::Sender`] around a [`batcher::Destination`]; data passes through.

pub(crate) mod aws_data_firehose;
pub(crate) mod aws_destination;
pub(crate) mod aws_dynamodb_put;
pub(crate) mod aws_eventbridge;
pub(crate) mod aws_kinesis_data_stream;
pub(crate) mod aws_lambda;
pub(crate) mod aws_messages;
mod aws_records;
pub(crate) mod aws_s3;
pub(crate) mod aws_sns;
pub(crate) mod aws_sqs;
pub(crate) mod batcher;
pub(crate) mod file;
pub(crate) mod http_post;
pub(crate) mod object_per_batch;
pub(crate) mod stdout;

use sluice_engine::Registry;

/// Registers the family.
pub(crate) fn register(r: &mut Registry) {
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
    r.stateful("send_file", file::SendFile::build);
    r.stateful("send_http_post", http_post::SendHttpPost::build);
    r.stateful("send_stdout", stdout::SendStdout::build);
}
