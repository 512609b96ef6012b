//! The `enrich_*` family: transforms that look a value up in an outside service and write
//! what they find into the message. Each is stateless (the pipeline runs it on several
//! messages at once, keeping their order) and makes its client on first use.

pub mod aws_dynamodb_query;
pub mod aws_lambda;
pub mod dns;
pub mod dns_domain_lookup;
pub mod dns_ip_lookup;
pub mod dns_text_lookup;
pub mod http_get;
pub mod http_post;
pub mod kv_store;
pub mod kv_store_item_get;
pub mod kv_store_item_set;
pub mod kv_store_set_add;

use sluice_engine::Registry;

use crate::ctor;

/// Registers the family.
pub fn register(r: &mut Registry) {
    r.transform(
        "enrich_aws_dynamodb_query",
        ctor!(aws_dynamodb_query::EnrichAwsDynamodbQuery),
    );
    r.transform("enrich_aws_lambda", ctor!(aws_lambda::EnrichAwsLambda));
    r.transform(
        "enrich_dns_domain_lookup",
        ctor!(dns_domain_lookup::EnrichDnsDomainLookup),
    );
    r.transform(
        "enrich_dns_ip_lookup",
        ctor!(dns_ip_lookup::EnrichDnsIpLookup),
    );
    r.transform(
        "enrich_dns_text_lookup",
        ctor!(dns_text_lookup::EnrichDnsTextLookup),
    );
    // Substation's library spells it so (its engine does not know this name).
    r.transform(
        "enrich_dns_txt_lookup",
        ctor!(dns_text_lookup::EnrichDnsTextLookup),
    );
    r.transform("enrich_http_get", ctor!(http_get::EnrichHttpGet));
    r.transform("enrich_http_post", ctor!(http_post::EnrichHttpPost));
    let get = ctor!(kv_store_item_get::EnrichKvStoreItemGet);
    r.transform("enrich_kv_store_item_get", get);
    // Substation's deprecated names, still accepted.
    r.transform("enrich_kv_store_get", get);
    let set = ctor!(kv_store_item_set::EnrichKvStoreItemSet);
    r.transform("enrich_kv_store_item_set", set);
    r.transform("enrich_kv_store_set", set);
    r.transform(
        "enrich_kv_store_set_add",
        ctor!(kv_store_set_add::EnrichKvStoreSetAdd),
    );
}
