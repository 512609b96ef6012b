//! Warnings about how a config places its `meta_kv_store_lock`s, for `sluice vet` and the
//! Lambda function's init.
//!
//! A lock runs its inner list once per key; what happens to a duplicate (a message whose key
//! was processed already: a redelivery, a rerun) is its `duplicates` setting. With
//! `continue`, the default (Substation's), the duplicate goes on unchanged past the lock, so
//! a send *after* the lock sends it again: a Lambda stream batch retried from its lowest
//! failure re-sends every delivered record after it, and a rerun of a file re-sends every
//! line. That is right when the send must see every message (the lock guards only what is
//! inside it), and wrong when the send is what must happen once; the config cannot say
//! which, so this is a warning, with the ways to make the send happen once. A transform
//! between the lock and the send that can drop messages (one holding a `utility_drop`:
//! Substation's consumer pattern marks what the lock let through and drops the rest) may be
//! dropping the duplicates, and silences it.

use serde_json::Value;
use sluice_engine::ConfigWarning;

/// The warnings for the transform list `transforms` (a compiled config's), at `location`
/// (`transforms`).
pub fn warnings(transforms: &Value, location: &str) -> Vec<ConfigWarning> {
    let mut out = Vec::new();
    if let Some(items) = transforms.as_array() {
        check_list(&placed(items, location), &[], &mut out);
    }
    out
}

/// A transform with its place.
type Placed = (String, Value);

/// The items of a list at `at`, each with its place.
fn placed(items: &[Value], at: &str) -> Vec<Placed> {
    items
        .iter()
        .enumerate()
        .map(|(i, t)| (format!("{at}[{i}]"), t.clone()))
        .collect()
}

/// What a message meets after a lock: a send, or a transform that can drop it.
enum Met {
    Send(String, String),
    Filter,
}

/// Checks the transforms `list`, whose messages meet `later` once they leave it (what is
/// after it in the lists that enclose it).
fn check_list(list: &[Placed], later: &[Met], out: &mut Vec<ConfigWarning>) {
    for (i, (here, t)) in list.iter().enumerate() {
        // What a message leaving this transform meets: the rest of this list, inside the
        // transforms there too, then what is after this list.
        let mut after = Vec::new();
        for (next_at, next) in &list[i + 1..] {
            met_in(next, next_at, &mut after);
        }
        after.extend(later.iter().map(|m| match m {
            Met::Send(a, t) => Met::Send(a.clone(), t.clone()),
            Met::Filter => Met::Filter,
        }));
        let ty = t.get("type").and_then(Value::as_str).unwrap_or("");
        let settings = t.get("settings").unwrap_or(&Value::Null);
        if ty == "meta_kv_store_lock"
            && settings.get("duplicates").and_then(Value::as_str) != Some("drop")
            && let Some(Met::Send(send_at, send)) = after.first()
        {
            out.push(ConfigWarning {
                location: here.clone(),
                message: format!(
                    "meta_kv_store_lock lets duplicates continue (duplicates: 'continue', the default) and {send_at} ({send}) after it sends them: a message whose key was processed already is sent there again (in Lambda, every delivered record after the lowest failure of a retried batch; in a rerun, every line). If that send must happen once per key, set duplicates: 'drop' or move the send inside the lock"
                ),
            });
        }
        for inner in inner_lists(settings, &format!("{here}.settings")) {
            check_list(&inner, &after, out);
        }
    }
}

/// What a message meets in the transform `t` at `at`: a filter when it can drop messages
/// (it holds a `utility_drop`), else its sends, nested ones included, in order.
fn met_in(t: &Value, at: &str, out: &mut Vec<Met>) {
    if drops(t) {
        out.push(Met::Filter);
        return;
    }
    let ty = t.get("type").and_then(Value::as_str).unwrap_or("");
    if ty.starts_with("send_") {
        out.push(Met::Send(at.to_string(), ty.to_string()));
    }
    let settings = t.get("settings").unwrap_or(&Value::Null);
    for inner in inner_lists(settings, &format!("{at}.settings")) {
        for (x_at, x) in inner {
            met_in(&x, &x_at, out);
        }
    }
}

/// Whether the transform `t` is or holds a `utility_drop`.
fn drops(t: &Value) -> bool {
    t.get("type").and_then(Value::as_str) == Some("utility_drop")
        || inner_lists(t.get("settings").unwrap_or(&Value::Null), "")
            .iter()
            .flatten()
            .any(|(_, x)| drops(x))
}

/// The transform lists inside a transform's settings (`transforms`, each case's
/// `transforms`, a lone `transform`, `auxiliary_transforms`), in order, each item with its
/// place. A lone transform is a list of one.
fn inner_lists(v: &Value, at: &str) -> Vec<Vec<Placed>> {
    let mut out = Vec::new();
    collect(v, at, &mut out);
    out
}

fn collect(v: &Value, at: &str, out: &mut Vec<Vec<Placed>>) {
    match v {
        Value::Array(items) if !items.is_empty() && items.iter().all(is_transform) => {
            out.push(placed(items, at));
        }
        // A lone transform (`meta_for_each`'s `transform`).
        Value::Object(_) if is_transform(v) => out.push(vec![(at.to_string(), v.clone())]),
        Value::Object(o) => {
            for (k, child) in o {
                // Neither a condition nor a kv store is a transform (they send nothing and
                // lock nothing), though they have a `type` too.
                if k == "condition" || k == "kv_store" {
                    continue;
                }
                collect(child, &format!("{at}.{k}"), out);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                collect(child, &format!("{at}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Whether `v` looks like a transform: an object with a string `type`.
fn is_transform(v: &Value) -> bool {
    v.get("type").is_some_and(Value::is_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lock(duplicates: Option<&str>, inner: Value) -> Value {
        let mut settings = json!({"kv_store": {"type": "memory"}, "transforms": inner});
        if let Some(d) = duplicates {
            settings["duplicates"] = json!(d);
        }
        json!({"type": "meta_kv_store_lock", "settings": settings})
    }

    fn send() -> Value {
        json!({"type": "send_aws_kinesis_data_stream", "settings": {}})
    }

    fn insert() -> Value {
        json!({"type": "object_insert", "settings": {}})
    }

    #[test]
    fn a_lock_whose_duplicates_continue_into_a_later_send_is_named_with_the_send() {
        // (config, the (lock, send) places warned about)
        let cases: Vec<(Value, Vec<(&str, &str)>)> = vec![
            // Substation's consumer pattern: the send after the lock.
            (
                json!([lock(None, json!([insert()])), send()]),
                vec![(
                    "transforms[0]",
                    "transforms[1] (send_aws_kinesis_data_stream)",
                )],
            ),
            (
                json!([lock(Some("continue"), json!([insert()])), insert(), send()]),
                vec![(
                    "transforms[0]",
                    "transforms[2] (send_aws_kinesis_data_stream)",
                )],
            ),
            // Dropped duplicates, or the send inside the lock: nothing to say.
            (
                json!([lock(Some("drop"), json!([insert()])), send()]),
                vec![],
            ),
            (json!([lock(None, json!([send()]))]), vec![]),
            (json!([send(), lock(None, json!([send()]))]), vec![]),
            // A send nested in a later transform, and a lock nested in an earlier one
            // whose messages reach a send after it.
            (
                json!([
                    {"type": "meta_switch", "settings": {"cases": [
                        {"condition": {"type": "string_contains", "settings": {}},
                         "transforms": [lock(None, json!([insert()]))]}
                    ]}},
                    {"type": "meta_switch", "settings": {"cases": [
                        {"transforms": [insert(), send()]}
                    ]}},
                ]),
                vec![(
                    "transforms[0].settings.cases[0].transforms[0]",
                    "transforms[1].settings.cases[0].transforms[1] (send_aws_kinesis_data_stream)",
                )],
            ),
            // Substation's consumer pattern: what the lock did not mark is dropped first.
            (
                json!([
                    lock(None, json!([insert()])),
                    {"type": "meta_switch", "settings": {"cases": [
                        {"condition": {"type": "meta_none", "settings": {}},
                         "transforms": [{"type": "utility_drop", "settings": {}}]}
                    ]}},
                    send(),
                ]),
                vec![],
            ),
            // meta_for_each's lone transform.
            (
                json!([
                    {"type": "meta_for_each", "settings": {"transform": lock(None, json!([insert()]))}},
                    send(),
                ]),
                vec![(
                    "transforms[0].settings.transform",
                    "transforms[1] (send_aws_kinesis_data_stream)",
                )],
            ),
        ];
        for (config, want) in cases {
            let got: Vec<(String, String)> = warnings(&config, "transforms")
                .into_iter()
                .map(|w| {
                    let send = w
                        .message
                        .split(" and ")
                        .nth(1)
                        .and_then(|m| m.split(" after it").next())
                        .unwrap_or_default()
                        .to_string();
                    (w.location, send)
                })
                .collect();
            let want: Vec<(String, String)> = want
                .into_iter()
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .collect();
            assert_eq!(got, want, "{config}");
        }
    }

    #[test]
    fn the_warning_says_what_happens_and_what_to_do() {
        let w = warnings(
            &json!([lock(None, json!([insert()])), send()]),
            "transforms",
        );
        assert_eq!(
            w[0].to_string(),
            "transforms[0]: meta_kv_store_lock lets duplicates continue (duplicates: 'continue', the default) and transforms[1] (send_aws_kinesis_data_stream) after it sends them: a message whose key was processed already is sent there again (in Lambda, every delivered record after the lowest failure of a retried batch; in a rerun, every line). If that send must happen once per key, set duplicates: 'drop' or move the send inside the lock"
        );
    }
}
