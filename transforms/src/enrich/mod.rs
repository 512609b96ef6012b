//! The `enrich_*` family: transforms that look a value up in an outside service and write
//! what they find into the message. Each is stateless (the pipeline runs it on several
//! messages at once, keeping their order) and makes its client on first use.

pub mod aws_dynamodb_query;
pub mod aws_lambda;

use sluice_engine::Registry;

use crate::ctor;

/// Registers the family.
pub fn register(r: &mut Registry) {
    r.transform(
        "enrich_aws_dynamodb_query",
        ctor!(aws_dynamodb_query::EnrichAwsDynamodbQuery),
    );
    r.transform("enrich_aws_lambda", ctor!(aws_lambda::EnrichAwsLambda));
}
