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
    #[cfg(feature = "aws")]
    {
        r.stateless(
            "enrich_aws_dynamodb_query",
            aws_dynamodb_query::EnrichAwsDynamodbQuery::build,
        );
        r.stateless("enrich_aws_lambda", aws_lambda::EnrichAwsLambda::build);
    }
    r.stateless(
        "enrich_dns_domain_lookup",
        dns_domain_lookup::EnrichDnsDomainLookup::build,
    );
    r.stateless(
        "enrich_dns_ip_lookup",
        dns_ip_lookup::EnrichDnsIpLookup::build,
    );
    r.stateless(
        "enrich_dns_text_lookup",
        dns_text_lookup::EnrichDnsTextLookup::build,
    );
    // Substation's library spells it so (its engine does not know this name).
    r.stateless(
        "enrich_dns_txt_lookup",
        dns_text_lookup::EnrichDnsTextLookup::build,
    );
    r.stateless("enrich_http_get", http_get::EnrichHttpGet::build);
    r.stateless("enrich_http_post", http_post::EnrichHttpPost::build);
    use kv_store_item_get::EnrichKvStoreItemGet as Get;
    use kv_store_item_set::EnrichKvStoreItemSet as Set;
    r.transform("enrich_kv_store_item_get", |b| {
        Get::build(b).map(Get::into_transform)
    });
    // Substation's deprecated names, still accepted.
    r.transform("enrich_kv_store_get", |b| {
        Get::build(b).map(Get::into_transform)
    });
    r.transform("enrich_kv_store_item_set", |b| {
        Set::build(b).map(Set::into_transform)
    });
    r.transform("enrich_kv_store_set", |b| {
        Set::build(b).map(Set::into_transform)
    });
    r.transform("enrich_kv_store_set_add", |b| {
        kv_store_set_add::EnrichKvStoreSetAdd::build(b)
            .map(kv_store_set_add::EnrichKvStoreSetAdd::into_transform)
    });
}
