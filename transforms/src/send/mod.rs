//! The `send` family: transforms whose side effect is delivering batches somewhere. Every
//! send is a [`batcher::Sender`] around a [`batcher::Destination`]; data passes through.

pub mod aws_data_firehose;
pub mod aws_destination;
pub mod aws_dynamodb_put;
pub mod aws_eventbridge;
pub mod aws_kinesis_data_stream;
pub mod aws_lambda;
pub mod aws_messages;
mod aws_records;
pub mod aws_s3;
pub mod aws_sns;
pub mod aws_sqs;
pub mod batcher;
pub mod file;
pub mod http_post;
pub mod object_per_batch;
pub mod stdout;

use sluice_engine::Registry;

/// Registers the family.
pub fn register(r: &mut Registry) {
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
