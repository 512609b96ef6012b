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

use crate::ctor;

/// Registers the family.
pub fn register(r: &mut Registry) {
    r.transform(
        "send_aws_data_firehose",
        ctor!(aws_data_firehose::SendAwsDataFirehose),
    );
    r.transform(
        "send_aws_dynamodb_put",
        ctor!(aws_dynamodb_put::SendAwsDynamodbPut),
    );
    r.transform(
        "send_aws_eventbridge",
        ctor!(aws_eventbridge::SendAwsEventbridge),
    );
    r.transform(
        "send_aws_kinesis_data_stream",
        ctor!(aws_kinesis_data_stream::SendAwsKinesisDataStream),
    );
    r.transform("send_aws_sns", ctor!(aws_sns::SendAwsSns));
    r.transform("send_aws_sqs", ctor!(aws_sqs::SendAwsSqs));
    r.transform("send_aws_s3", ctor!(aws_s3::SendAwsS3));
    r.transform("send_aws_lambda", ctor!(aws_lambda::SendAwsLambda));
    r.transform("send_file", ctor!(file::SendFile));
    r.transform("send_http_post", ctor!(http_post::SendHttpPost));
    r.transform("send_stdout", ctor!(stdout::SendStdout));
}
