//! The `enrich_*` family: transforms that look a value up in an outside service and write
//! what they find into the message. Each is stateless (the pipeline runs it on several
//! messages at once, keeping their order) and makes its client on first use.

#[cfg(feature = "aws")]
pub(crate) mod aws_dynamodb_query;
#[cfg(feature = "aws")]
pub(crate) mod aws_lambda;
pub(crate) mod dns;
pub(crate) mod dns_domain_lookup;
pub(crate) mod dns_ip_lookup;
pub(crate) mod dns_text_lookup;
pub(crate) mod http_get;
pub(crate) mod http_post;
pub(crate) mod kv_store;
pub(crate) mod kv_store_item_get;
pub(crate) mod kv_store_item_set;
pub(crate) mod kv_store_set_add;

use sluice_engine::Registry;

/// Registers the family.
pub(crate) fn register(r: &mut Registry) {
    crate::register_aws! { r;
        stateless(&AWS_DYNAMODB_QUERY, aws_dynamodb_query::EnrichAwsDynamodbQuery::build);
        stateless(&AWS_LAMBDA, aws_lambda::EnrichAwsLambda::build);
    }
    r.stateless(
        &dns_domain_lookup::INFO,
        dns_domain_lookup::EnrichDnsDomainLookup::build,
    );
    r.stateless(
        &dns_ip_lookup::INFO,
        dns_ip_lookup::EnrichDnsIpLookup::build,
    );
    r.stateless(
        &dns_text_lookup::INFO,
        dns_text_lookup::EnrichDnsTextLookup::build,
    );
    r.stateless(&http_get::INFO, http_get::EnrichHttpGet::build);
    r.stateless(&http_post::INFO, http_post::EnrichHttpPost::build);
    use kv_store_item_get::EnrichKvStoreItemGet as Get;
    use kv_store_item_set::EnrichKvStoreItemSet as Set;
    r.transform(&kv_store_item_get::INFO, |b| {
        Get::build(b).map(Get::into_transform)
    });
    r.transform(&kv_store_item_set::INFO, |b| {
        Set::build(b).map(Set::into_transform)
    });
    r.transform(&kv_store_set_add::INFO, |b| {
        kv_store_set_add::EnrichKvStoreSetAdd::build(b)
            .map(kv_store_set_add::EnrichKvStoreSetAdd::into_transform)
    });
}

// The AWS-backed types' descriptors are here rather than in their files, which only a build
// with the `aws` feature compiles: a build without it still registers these names (to say
// that it lacks them) and lists them in the reference.

/// What registers the `enrich_aws_dynamodb_query` transform and lists it in the reference index.
pub(crate) const AWS_DYNAMODB_QUERY: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "enrich_aws_dynamodb_query",
    aliases: &[],
    library: "sub.tf.enrich.aws.dynamodb.query",
    summary: "the items of a DynamoDB table with a key, as a JSON array",
    reach: sluice_engine::Reach::Aws,
    example: r#"{"aws": {"arn": "arn:aws:dynamodb:us-east-1:123456789012:table/events"}, "attributes": {"partition_key": "pk"}, "object": {"source_key": "k", "target_key": "v"}}"#,
};

/// What registers the `enrich_aws_lambda` transform and lists it in the reference index.
pub(crate) const AWS_LAMBDA: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "enrich_aws_lambda",
    aliases: &[],
    library: "sub.tf.enrich.aws.lambda",
    summary: "the response of a Lambda function invoked with a value",
    reach: sluice_engine::Reach::Aws,
    example: r#"{"aws": {"arn": "arn:aws:lambda:us-east-1:123456789012:function:f"}, "object": {"source_key": "k", "target_key": "v"}}"#,
};
