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
    crate::register_aws! { r;
        stateful(&AWS_DATA_FIREHOSE, aws_data_firehose::SendAwsDataFirehose::build);
        stateful(&AWS_DYNAMODB_PUT, aws_dynamodb_put::SendAwsDynamodbPut::build);
        stateful(&AWS_EVENTBRIDGE, aws_eventbridge::SendAwsEventbridge::build);
        stateful(&AWS_KINESIS_DATA_STREAM, aws_kinesis_data_stream::SendAwsKinesisDataStream::build);
        stateful(&AWS_LAMBDA, aws_lambda::SendAwsLambda::build);
        stateful(&AWS_S3, aws_s3::SendAwsS3::build);
        stateful(&AWS_SNS, aws_sns::SendAwsSns::build);
        stateful(&AWS_SQS, aws_sqs::SendAwsSqs::build);
    }
    r.stateful(&file::INFO, file::SendFile::build);
    r.stateful(&gcp_storage::INFO, gcp_storage::SendGcpStorage::build);
    r.stateful(&http_post::INFO, http_post::SendHttpPost::build);
    r.transform(&stdout::INFO, |b| {
        stdout::SendStdout::build(b).map(stdout::SendStdout::into_transform)
    });
}

// The AWS sends' descriptors are here rather than in their files, which only a build with
// the `aws` feature compiles: a build without it still registers these names (to say that
// it lacks them) and lists them in the reference.

/// What registers the `send_aws_data_firehose` transform and lists it in the reference index.
pub(crate) const AWS_DATA_FIREHOSE: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "send_aws_data_firehose",
    aliases: &[],
    library: "sub.tf.send.aws.firehose",
    summary: "puts each batch into a Firehose delivery stream (PutRecordBatch)",
    reach: sluice_engine::Reach::Aws,
    example: r#"{"aws": {"arn": "arn:aws:firehose:us-east-1:123456789012:deliverystream/d"}}"#,
};

/// What registers the `send_aws_dynamodb_put` transform and lists it in the reference index.
pub(crate) const AWS_DYNAMODB_PUT: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "send_aws_dynamodb_put",
    aliases: &[],
    library: "sub.tf.send.aws.dynamodb.put",
    summary: "writes JSON objects to a DynamoDB table (BatchWriteItem), or, with `transactional`, together with the lock's commit (TransactWriteItems)",
    reach: sluice_engine::Reach::Aws,
    example: r#"{"aws": {"arn": "arn:aws:dynamodb:us-east-1:123456789012:table/events"}}"#,
};

/// What registers the `send_aws_eventbridge` transform and lists it in the reference index.
pub(crate) const AWS_EVENTBRIDGE: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "send_aws_eventbridge",
    aliases: &[],
    library: "sub.tf.send.aws.eventbridge",
    summary: "puts each batch onto an EventBridge event bus (PutEvents), one event per item",
    reach: sluice_engine::Reach::Aws,
    example: "{}",
};

/// What registers the `send_aws_kinesis_data_stream` transform and lists it in the reference index.
pub(crate) const AWS_KINESIS_DATA_STREAM: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "send_aws_kinesis_data_stream",
    aliases: &[],
    library: "sub.tf.send.aws.kinesis_data_stream",
    summary: "puts each batch into a Kinesis data stream (PutRecords), a partition key per record",
    reach: sluice_engine::Reach::Aws,
    example: r#"{"aws": {"arn": "arn:aws:kinesis:us-east-1:123456789012:stream/s"}}"#,
};

/// What registers the `send_aws_sns` transform and lists it in the reference index.
pub(crate) const AWS_SNS: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "send_aws_sns",
    aliases: &[],
    library: "sub.tf.send.aws.sns",
    summary: "publishes each batch to an SNS topic (PublishBatch); FIFO topics get group and deduplication ids",
    reach: sluice_engine::Reach::Aws,
    example: r#"{"aws": {"arn": "arn:aws:sns:us-east-1:123456789012:topic"}}"#,
};

/// What registers the `send_aws_sqs` transform and lists it in the reference index.
pub(crate) const AWS_SQS: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "send_aws_sqs",
    aliases: &[],
    library: "sub.tf.send.aws.sqs",
    summary: "sends each batch to an SQS queue (SendMessageBatch); FIFO queues get group and deduplication ids",
    reach: sluice_engine::Reach::Aws,
    example: r#"{"aws": {"arn": "arn:aws:sqs:us-east-1:123456789012:queue"}}"#,
};

/// What registers the `send_aws_s3` transform and lists it in the reference index.
pub(crate) const AWS_S3: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "send_aws_s3",
    aliases: &[],
    library: "sub.tf.send.aws.s3",
    summary: "writes each batch to a new S3 object (PutObject, or a multipart upload when large)",
    reach: sluice_engine::Reach::Aws,
    example: r#"{"aws": {"arn": "arn:aws:s3:::bucket"}, "storage_class": "STANDARD", "file_path": {"uuid": true}}"#,
};

/// What registers the `send_aws_lambda` transform and lists it in the reference index.
pub(crate) const AWS_LAMBDA: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "send_aws_lambda",
    aliases: &[],
    library: "sub.tf.send.aws.lambda",
    summary: "invokes a Lambda function asynchronously, once per item",
    reach: sluice_engine::Reach::Aws,
    example: r#"{"aws": {"arn": "arn:aws:lambda:us-east-1:123456789012:function:f"}}"#,
};
