//! Zeek conn events (one JSON object a line on stdin) -> Elastic Common Schema (one a line
//! on stdout): the mapping of benches/zeek/zeek_to_ecs.jq and
//! examples/benchmark/zeek_to_ecs/config.jsonnet, written as a user would with serde_json:
//! parse each line to a `Value`, build the output with `json!`, write it with `to_writer`
//! (the loop in lib.rs, shared with the CloudTrail baseline).
//! It is the hand-written baseline of benches/zeek/bench.py, deliberately not optimised.

use serde_json::{Value, json};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    baseline::map_lines(|zeek| Ok(to_ecs(zeek)))
}

fn to_ecs(zeek: Value) -> Value {
    let uid = zeek["uid"].clone();
    let hash = zeek["uid"].as_str().map(|s| s.to_ascii_lowercase());
    let outcome = if zeek["conn_state"] == "SF" {
        "success"
    } else {
        "failure"
    };
    let duration = zeek["duration"].as_f64().map(|d| d * 1_000_000_000.0);
    let timestamp = zeek["ts"].as_f64().map(|ts| format_utc(ts.floor() as i64));
    let orig_h = zeek["id.orig_h"].clone();
    let orig_p = zeek["id.orig_p"].clone();
    let orig_pkts = zeek["orig_pkts"].clone();
    let orig_bytes = zeek["orig_bytes"].clone();
    let resp_h = zeek["id.resp_h"].clone();
    let resp_p = zeek["id.resp_p"].clone();
    let resp_pkts = zeek["resp_pkts"].clone();
    let resp_bytes = zeek["resp_bytes"].clone();
    let bytes = add(&orig_bytes, &resp_bytes);
    let packets = add(&orig_pkts, &resp_pkts);
    let transport = zeek["proto"].clone();
    let protocol = zeek["service"].clone();
    json!({
        "event": {
            "original": zeek,
            "id": uid,
            "hash": hash,
            "kind": "event",
            "category": ["network"],
            "action": "network-connection",
            "outcome": outcome,
            "duration": duration,
        },
        "@timestamp": timestamp,
        "client": {
            "address": orig_h.clone(),
            "ip": orig_h,
            "port": orig_p,
            "packets": orig_pkts,
            "bytes": orig_bytes,
        },
        "server": {
            "address": resp_h.clone(),
            "ip": resp_h,
            "port": resp_p,
            "packets": resp_pkts,
            "bytes": resp_bytes,
        },
        "network": {
            "transport": transport,
            "protocol": protocol,
            "bytes": bytes,
            "packets": packets,
        },
    })
}

/// jq's `+` on two numbers (integers stay integers here); null when either is missing.
fn add(a: &Value, b: &Value) -> Value {
    match (a.as_i64(), b.as_i64()) {
        (Some(a), Some(b)) => json!(a + b),
        _ => match (a.as_f64(), b.as_f64()) {
            (Some(a), Some(b)) => json!(a + b),
            _ => Value::Null,
        },
    }
}

/// jq's `todate`: seconds since the Unix epoch as "YYYY-MM-DDTHH:MM:SSZ" (UTC).
fn format_utc(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 -> (year, month, day), proleptic Gregorian (Howard Hinnant's
/// civil_from_days).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + if month <= 2 { 1 } else { 0 };
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_jq_todate() {
        assert_eq!(format_utc(1_591_367_999), "2020-06-05T14:39:59Z");
        assert_eq!(format_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_utc(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_utc(-1), "1969-12-31T23:59:59Z");
    }
}
