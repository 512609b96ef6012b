//! Which locks a handler that answers with the pipeline's output can run.
//!
//! Firehose, API Gateway and plain invokes take the function's answer as the effect itself
//! (Firehose delivers what it says, a caller gets what it returns), and they call again when
//! an answer is lost (a timeout, an error): Firehose retries the whole invocation. Under
//! `meta_kv_store_lock`, the retried records are duplicates by then (their keys committed
//! when the first answer was made), so a lock that drops duplicates answers them `Dropped`
//! (Firehose discards them: lost), and one whose inner list changes the message answers
//! them unchanged. A lock keeps the answers the same only when duplicates continue (the
//! default) and its inner list only sends (a send does not change the message): then the
//! lock decides what is sent once, and the answer is made by the transforms outside it,
//! alike on every call. Any other lock is refused when the function starts, saying why;
//! the answers are not kept with the keys (a Firehose record's answer can be 1 MB, more
//! than a DynamoDB item holds). Since a retried call gets the same answer anyway, such a
//! lock commits a key as soon as its own sends delivered the message, without waiting for
//! the answer (`OutputsReach::Answer`): a crash before the answer leaves nothing pending
//! that was delivered.

use serde_json::Value;

use super::HandlerKind;

/// Whether `kind` answers with the pipeline's output.
pub(crate) fn answers_with_output(kind: HandlerKind) -> bool {
    matches!(
        kind,
        HandlerKind::DataFirehose | HandlerKind::ApiGateway | HandlerKind::Lambda
    )
}

/// Checks the locks in `transforms` (a config's list) for handler `kind`: the error names
/// the first lock that would change a retried call's answer, where it is, and why.
pub(crate) fn check_locks(kind: HandlerKind, transforms: &Value) -> Result<(), String> {
    if !answers_with_output(kind) {
        return Ok(());
    }
    let mut locks = Vec::new();
    find_locks(transforms, "transforms", &mut locks);
    for (at, settings) in locks {
        let drops = settings.get("duplicates").and_then(Value::as_str) == Some("drop");
        let changes = settings
            .get("transforms")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .find_map(|(i, t)| {
                let ty = t.get("type").and_then(Value::as_str).unwrap_or("");
                (!ty.starts_with("send_")).then(|| format!("{at}.settings.transforms[{i}] ({ty})"))
            });
        let why = match (drops, changes) {
            (true, _) => {
                "with duplicates: 'drop' it would answer a retried record as dropped".to_string()
            }
            (false, Some(t)) => format!(
                "its inner list changes the message ({t}), so it would answer a retried record unchanged"
            ),
            (false, None) => continue,
        };
        return Err(format!(
            "{at}: meta_kv_store_lock cannot guard what {} answers: {} retries a call whose answer was lost, and by then the lock has taken the records for duplicates; {why}. Keep duplicates: 'continue' and only sends inside the lock (the transforms that make the answer outside it), or lock in a consumer after the delivery stream",
            kind.name(),
            match kind {
                HandlerKind::DataFirehose => "Firehose",
                HandlerKind::ApiGateway => "API Gateway's client",
                _ => "the caller",
            }
        ));
    }
    Ok(())
}

/// Every `meta_kv_store_lock` in `v`, with where it is (`transforms[2]`, ...).
fn find_locks<'a>(v: &'a Value, at: &str, out: &mut Vec<(String, &'a Value)>) {
    match v {
        Value::Object(o) => {
            if o.get("type").and_then(Value::as_str) == Some("meta_kv_store_lock") {
                out.push((at.to_string(), o.get("settings").unwrap_or(&Value::Null)));
            }
            for (k, child) in o {
                find_locks(child, &format!("{at}.{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, child) in a.iter().enumerate() {
                find_locks(child, &format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lock(settings: Value) -> Value {
        json!([
            {"type": "object_copy", "settings": {}},
            {"type": "meta_switch", "settings": {"cases": [{"transforms": [
                {"type": "meta_kv_store_lock", "settings": settings}
            ]}]}}
        ])
    }

    #[test]
    fn table() {
        let sends =
            json!({"transforms": [{"type": "send_aws_kinesis_data_stream", "settings": {}}]});
        let drops = json!({"duplicates": "drop", "transforms": []});
        let changes = json!({"transforms": [{"type": "send_stdout"}, {"type": "object_insert"}]});
        let at = "transforms[1].settings.cases[0].transforms[0]";
        let cases: Vec<(HandlerKind, &Value, Option<&str>)> = vec![
            (HandlerKind::DataFirehose, &sends, None),
            (
                HandlerKind::DataFirehose,
                &drops,
                Some("answer a retried record as dropped"),
            ),
            (
                HandlerKind::ApiGateway,
                &changes,
                Some("transforms[1] (object_insert)"),
            ),
            (HandlerKind::Lambda, &drops, Some("the caller retries")),
            // Stream and queue handlers answer with which records failed, not with output.
            (HandlerKind::KinesisDataStream, &drops, None),
            (HandlerKind::Sqs, &changes, None),
        ];
        for (kind, settings, want) in cases {
            let got = check_locks(kind, &lock(settings.clone()));
            match want {
                None => assert_eq!(got, Ok(()), "{kind:?}"),
                Some(w) => {
                    let e = got.unwrap_err();
                    assert!(e.starts_with(at) && e.contains(w), "{kind:?}: {e}");
                }
            }
        }
    }
}
