//! The `send` family: transforms whose side effect is delivering batches somewhere. Every
//! send is a [`batcher::Sender`] around a [`batcher::Destination`]; data passes through.

pub mod aws_data_firehose;
pub mod aws_kinesis_data_stream;
pub mod aws_lambda;
mod aws_records;
pub mod batcher;
pub mod file;
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
        "send_aws_kinesis_data_stream",
        ctor!(aws_kinesis_data_stream::SendAwsKinesisDataStream),
    );
    r.transform("send_aws_lambda", ctor!(aws_lambda::SendAwsLambda));
    r.transform("send_file", ctor!(file::SendFile));
    r.transform("send_stdout", ctor!(stdout::SendStdout));
}
