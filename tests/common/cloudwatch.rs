//! CloudWatch alarms on moto, for the tests of `AWS_KINESIS_AUTOSCALE`.
//!
//! aws-sdk-cloudwatch (1.x) speaks only the Smithy RPC v2 CBOR protocol (`POST
//! /service/GraniteServiceVersion20100801/operation/OP`, CBOR bodies), which moto 5.2.5
//! neither routes nor parses (it answers 404); moto does implement CloudWatch's alarms
//! behind its AWS JSON 1.0 protocol (`POST /` with `X-Amz-Target`), which CloudWatch also
//! serves. So the function under test is pointed (`AWS_ENDPOINT_URL_CLOUDWATCH`) at
//! [`cbor_endpoint`], a small proxy that re-encodes each CBOR request as JSON for moto and
//! moto's JSON answer as CBOR: the alarms are still moto's, stored and answered by it.
//! The tests read and set alarms themselves with [`call`], in JSON.
//!
//! The re-encoding is generic: maps, lists, strings, numbers, booleans; a CBOR byte string
//! is base64 in JSON; a CBOR timestamp (tag 1) is epoch seconds, and a JSON number under a
//! key ending in `Timestamp` becomes one. Enough for the calls the function makes
//! (PutMetricAlarm, SetAlarmState and their errors).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::OnceLock;

use base64::Engine;
use ciborium::value::Value as Cbor;
use serde_json::Value;

use super::moto;

/// CloudWatch's JSON target prefix.
const TARGET: &str = "GraniteServiceVersion20100801";
/// What moto reads the service from (it checks no signature).
const AUTHORIZATION: &str = "AWS4-HMAC-SHA256 Credential=test/20250101/us-east-1/monitoring/aws4_request, SignedHeaders=host, Signature=0";

/// Calls CloudWatch operation `op` on moto at `endpoint` in JSON; answers moto's JSON or
/// fails the test with its error.
pub fn call(endpoint: &str, op: &str, body: &Value) -> Value {
    let target = format!("{TARGET}.{op}");
    let (status, _, answer) = moto::http_request(
        endpoint,
        "POST",
        "/",
        &[
            ("Content-Type", "application/x-amz-json-1.0"),
            ("X-Amz-Target", &target),
            ("Authorization", AUTHORIZATION),
        ],
        body.to_string().as_bytes(),
    );
    assert_eq!(
        status,
        200,
        "CloudWatch {op}: {}",
        String::from_utf8_lossy(&answer)
    );
    serde_json::from_slice(&answer).unwrap_or(Value::Null)
}

/// The alarm `name` as DescribeAlarms answers it.
pub fn alarm(endpoint: &str, name: &str) -> Value {
    let got = call(
        endpoint,
        "DescribeAlarms",
        &serde_json::json!({ "AlarmNames": [name] }),
    );
    got["MetricAlarms"]
        .as_array()
        .and_then(|a| a.first())
        .cloned()
        .unwrap_or_else(|| panic!("no alarm {name}: {got}"))
}

/// The endpoint of the RPC v2 CBOR proxy in front of the moto at `moto` (started once per
/// test binary; it serves until the binary exits).
pub fn cbor_endpoint(moto: &str) -> String {
    static PROXY: OnceLock<String> = OnceLock::new();
    PROXY
        .get_or_init(|| {
            let listener = TcpListener::bind("127.0.0.1:0").expect("a port for the proxy");
            let addr = listener.local_addr().expect("the proxy's address");
            let moto = moto.to_string();
            std::thread::spawn(move || {
                for conn in listener.incoming().flatten() {
                    let moto = moto.clone();
                    std::thread::spawn(move || serve(conn, &moto));
                }
            });
            format!("http://{addr}")
        })
        .clone()
}

/// Answers one request on `conn` (then closes it).
fn serve(mut conn: TcpStream, moto: &str) {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.lines();
    let path = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or("")
        .to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    assert!(
        header("transfer-encoding").is_none(),
        "the proxy reads bodies by Content-Length only: {head}"
    );
    let len: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => body.extend_from_slice(&chunk[..n]),
        }
    }
    let op = path.rsplit('/').next().unwrap_or_default();
    let request = if body.is_empty() {
        Value::Object(Default::default())
    } else {
        let cbor: Cbor = ciborium::de::from_reader(body.as_slice()).expect("a CBOR request");
        to_json(&cbor)
    };
    let target = format!("{TARGET}.{op}");
    let (status, moto_headers, answer) = moto::http_request(
        moto,
        "POST",
        "/",
        &[
            ("Content-Type", "application/x-amz-json-1.0"),
            ("X-Amz-Target", &target),
            (
                "Authorization",
                header("authorization").unwrap_or(AUTHORIZATION),
            ),
        ],
        request.to_string().as_bytes(),
    );
    let answer: Value =
        serde_json::from_slice(&answer).unwrap_or(Value::Object(Default::default()));
    let mut out = Vec::new();
    ciborium::ser::into_writer(&to_cbor(&answer, ""), &mut out).expect("encoding CBOR");
    // The awsQueryCompatible error code, which the SDK prefers to the body's.
    let query_error: String = moto_headers
        .iter()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("x-amzn-query-error"))
        .map(|(_, v)| format!("x-amzn-query-error: {}\r\n", v.trim()))
        .unwrap_or_default();
    let _ = write!(
        conn,
        "HTTP/1.1 {status} X\r\nContent-Type: application/cbor\r\nsmithy-protocol: rpc-v2-cbor\r\n\
         {query_error}Content-Length: {}\r\nConnection: close\r\n\r\n",
        out.len()
    );
    let _ = conn.write_all(&out);
}

fn to_json(v: &Cbor) -> Value {
    match v {
        Cbor::Integer(i) => {
            let i = i128::from(*i);
            match i64::try_from(i) {
                Ok(i) => Value::from(i),
                Err(_) => Value::from(u64::try_from(i).expect("a CBOR integer in range")),
            }
        }
        Cbor::Bytes(b) => Value::from(base64::engine::general_purpose::STANDARD.encode(b)),
        Cbor::Float(f) => Value::from(*f),
        Cbor::Text(s) => Value::from(s.as_str()),
        Cbor::Bool(b) => Value::from(*b),
        Cbor::Null => Value::Null,
        Cbor::Tag(_, inner) => to_json(inner),
        Cbor::Array(a) => Value::Array(a.iter().map(to_json).collect()),
        Cbor::Map(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (k.as_text().unwrap_or_default().to_string(), to_json(v)))
                .collect(),
        ),
        other => panic!("an unexpected CBOR item in a request: {other:?}"),
    }
}

/// `v` as CBOR; `key` is the name it is the value of.
fn to_cbor(v: &Value, key: &str) -> Cbor {
    match v {
        Value::Null => Cbor::Null,
        Value::Bool(b) => Cbor::Bool(*b),
        Value::Number(n) if key.ends_with("Timestamp") => {
            Cbor::Tag(1, Box::new(Cbor::Float(n.as_f64().unwrap_or_default())))
        }
        Value::Number(n) => match n.as_i64() {
            Some(i) => Cbor::Integer(i.into()),
            None => Cbor::Float(n.as_f64().unwrap_or_default()),
        },
        Value::String(s) => Cbor::Text(s.clone()),
        Value::Array(a) => Cbor::Array(a.iter().map(|x| to_cbor(x, key)).collect()),
        Value::Object(m) => Cbor::Map(
            m.iter()
                .map(|(k, x)| (Cbor::Text(k.clone()), to_cbor(x, k)))
                .collect(),
        ),
    }
}
