//! CloudTrail events (one JSON object a line on stdin) with a few ECS fields added and
//! `tlsDetails` dropped (one a line on stdout): the enrichment of
//! benches/cloudtrail/cloudtrail.jq and examples/benchmark/cloudtrail/config.jsonnet, written
//! as a user would with serde_json: parse each line to a `Value`, insert into its map, write
//! it with `to_writer` (the loop in lib.rs, shared with the Zeek baseline). It is the
//! hand-written baseline of benches/cloudtrail/bench.py, deliberately not optimised: like jq
//! and sluice today, it parses and writes back the whole event, most of which it never looks
//! at.

use serde_json::{Map, Value, json};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    baseline::map_lines(|mut event| {
        let record = event.as_object_mut().ok_or("a line is not a JSON object")?;
        enrich(record);
        Ok(event)
    })
}

/// jq's truthiness: anything but a missing value, null and false.
fn truthy(value: Option<&Value>) -> bool {
    !matches!(value, None | Some(Value::Null) | Some(Value::Bool(false)))
}

fn enrich(record: &mut Map<String, Value>) {
    let field =
        |record: &Map<String, Value>, key: &str| record.get(key).cloned().unwrap_or(Value::Null);
    let timestamp = field(record, "eventTime");
    let event_type = if truthy(record.get("readOnly")) {
        "access"
    } else {
        "change"
    };
    let outcome = if truthy(record.get("errorCode")) {
        "failure"
    } else {
        "success"
    };
    let event = json!({
        "kind": "event",
        "action": field(record, "eventName"),
        "type": [event_type],
        "outcome": outcome,
    });
    let source = json!({ "address": field(record, "sourceIPAddress") });
    let cloud = json!({
        "region": field(record, "awsRegion"),
        "account": { "id": field(record, "recipientAccountId") },
    });
    record.insert("@timestamp".to_string(), timestamp);
    record.insert("event".to_string(), event);
    record.insert("source".to_string(), source);
    record.insert("cloud".to_string(), cloud);
    // shift_remove keeps the other keys in their order (remove would swap the last one in).
    record.shift_remove("tlsDetails");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enriches_like_the_jq_program() {
        let mut event = json!({
            "eventTime": "2024-03-14T09:26:53Z",
            "eventName": "RunInstances",
            "awsRegion": "eu-west-1",
            "sourceIPAddress": "203.0.113.7",
            "readOnly": false,
            "errorCode": "AccessDenied",
            "recipientAccountId": "111122223333",
            "tlsDetails": {"tlsVersion": "TLSv1.3"},
            "eventCategory": "Management",
        });
        enrich(event.as_object_mut().unwrap());
        assert_eq!(
            serde_json::to_string(&event).unwrap(),
            r#"{"eventTime":"2024-03-14T09:26:53Z","eventName":"RunInstances","awsRegion":"eu-west-1","sourceIPAddress":"203.0.113.7","readOnly":false,"errorCode":"AccessDenied","recipientAccountId":"111122223333","eventCategory":"Management","@timestamp":"2024-03-14T09:26:53Z","event":{"kind":"event","action":"RunInstances","type":["change"],"outcome":"failure"},"source":{"address":"203.0.113.7"},"cloud":{"region":"eu-west-1","account":{"id":"111122223333"}}}"#
        );
        let mut read = json!({"readOnly": true, "errorCode": null});
        enrich(read.as_object_mut().unwrap());
        assert_eq!(read["event"]["type"], json!(["access"]));
        assert_eq!(read["event"]["outcome"], "success");
    }
}
