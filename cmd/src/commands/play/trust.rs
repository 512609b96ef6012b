//! What a config run by `sluice play` may reach beyond its own messages: off by default,
//! each on only with a flag the user gives when starting it (the page shows which in a
//! banner).
//!
//! Why: the playground runs configs that arrive over HTTP, typically pasted or opened from
//! a shared link. Even with the token ([`sluice_cmd::play_guard`]), a config the user did
//! not write could read their secrets or files and send them away. So, unless asked for:
//!
//! | flag              | what it allows                                                        |
//! |-------------------|-----------------------------------------------------------------------|
//! | `--allow-env`     | environment variables: `environment_variable` secrets (`${SECRET:…}`), jq's `env`/`$ENV`; without it the run's process has an empty environment |
//! | `--allow-files`   | files: `send_file`, the kv stores that keep or read files (`sqlite`, `csv_file`, ...); a file store whose `file` is a URL needs `--allow-network` too |
//! | `--allow-network` | the network: every AWS, GCP and HTTP send and enrichment, the `aws_dynamodb` kv store, `aws_secrets_manager` secrets |
//!
//! Three flags, not one `--trust`, so that trying an HTTP enrichment does not also hand the
//! page your files and environment. The check reads the compiled config before anything is
//! built: every object in it (the transforms, their kv stores and secrets, nested lists
//! and the `tests:`) whose `type` names something that needs a flag is refused, with the
//! transform and the flag named. A transform's or a kv store's need comes from its
//! descriptor's `reach` (declared beside its code), so a new type cannot slip past
//! unclassified.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The powers the user gave `sluice play` on its command line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Trust {
    pub env: bool,
    pub files: bool,
    pub network: bool,
}

/// One of the powers, with the flag that gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Power {
    Env,
    Files,
    Network,
}

impl Power {
    fn flag(self) -> &'static str {
        match self {
            Power::Env => "--allow-env",
            Power::Files => "--allow-files",
            Power::Network => "--allow-network",
        }
    }

    fn does(self) -> &'static str {
        match self {
            Power::Env => "reads environment variables",
            Power::Files => "reads or writes files",
            Power::Network => "calls the network",
        }
    }
}

impl Trust {
    fn allows(self, p: Power) -> bool {
        match p {
            Power::Env => self.env,
            Power::Files => self.files,
            Power::Network => self.network,
        }
    }

    /// The flags given, as the page's banner lists them (empty when none).
    pub(super) fn flags(self) -> Vec<&'static str> {
        [Power::Env, Power::Files, Power::Network]
            .into_iter()
            .filter(|p| self.allows(*p))
            .map(Power::flag)
            .collect()
    }
}

/// A config needs a power the user did not give.
#[derive(Debug, thiserror::Error)]
#[error(
    "{place}: {what} {}, which sluice play does not allow unless it is started with {}",
    .power.does(),
    .power.flag()
)]
pub(super) struct NotAllowed {
    place: String,
    what: String,
    power: Power,
}

/// What the type `name` (a transform's, a kv store's or a secret's) needs: a transform's
/// or a kv store's descriptor says what it reaches (`sluice_engine::Reach`); `None` for
/// what stays in the run's own memory (and for names sluice does not know, which the
/// registry refuses).
pub(super) fn needs(name: &str) -> Option<Power> {
    use sluice_engine::Reach;
    match name {
        "environment_variable" => Some(Power::Env),
        "aws_secrets_manager" => Some(Power::Network),
        _ => match sluice_transforms::transform_info(name)
            .or_else(|| sluice_transforms::kv_store::stores::info(name).map(|s| &s.info))?
            .reach
        {
            Reach::Memory => None,
            Reach::Files => Some(Power::Files),
            Reach::Network | Reach::Aws => Some(Power::Network),
        },
    }
}

/// Whether `obj`, a kv store of type `name`, reads its file from a URL (`s3://`, `gs://`,
/// `https://`, `http://`): the file stores fetch what their `file` setting names, so such a
/// store calls the network (with the user's cloud credentials) besides being a file store,
/// and needs `--allow-network` too.
fn reads_url(name: &str, obj: &serde_json::Map<String, Value>) -> bool {
    sluice_transforms::kv_store::stores::info(name)
        .and_then(|s| s.file)
        .and_then(|setting| obj.get("settings")?.get(setting)?.as_str())
        .is_some_and(sluice_platform::fetch::is_url)
}

/// Checks the compiled config `json` against `trust`; the first thing it needs and may not
/// have is the error.
pub(super) fn check(json: &Value, trust: Trust) -> Result<(), NotAllowed> {
    walk(json, String::new(), None, trust)
}

/// `at` is the path of `v` in the config; `within` the outermost transform around it, as
/// `transforms[2] (meta_switch)`, which the error names with the place relative to it.
fn walk(v: &Value, at: String, within: Option<&str>, trust: Trust) -> Result<(), NotAllowed> {
    match v {
        Value::Object(map) => {
            let mut here = None;
            if let Some(Value::String(name)) = map.get("type") {
                let needed = needs(name)
                    .into_iter()
                    .chain(reads_url(name, map).then_some(Power::Network));
                if let Some(power) = needed.into_iter().find(|p| !trust.allows(*p)) {
                    return Err(match within {
                        Some(t) => {
                            let base = t.split(" (").next().unwrap_or(t);
                            let rel = at.strip_prefix(&format!("{base}.")).unwrap_or(&at);
                            NotAllowed {
                                place: t.to_string(),
                                what: format!("its {rel} ({name})"),
                                power,
                            }
                        }
                        None => NotAllowed {
                            place: at,
                            what: format!("the {name} transform"),
                            power,
                        },
                    });
                }
                if within.is_none() {
                    here = Some(format!("{at} ({name})"));
                }
            }
            let within = here.as_deref().or(within);
            for (k, child) in map {
                let path = if at.is_empty() {
                    k.clone()
                } else {
                    format!("{at}.{k}")
                };
                walk(child, path, within, trust)?;
            }
            Ok(())
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                walk(child, format!("{at}[{i}]"), within, trust)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The descriptors' reach agrees with the names: the sends other than `send_stdout` and
    /// `send_file`, and the AWS, HTTP and DNS enrichments, call the network; `send_file`
    /// writes files; every other transform stays in memory.
    #[test]
    fn every_transform_type_is_classified_by_its_descriptor() {
        let r = sluice_transforms::registry();
        for t in r.transform_types() {
            let network = (t.starts_with("send_") && t != "send_stdout" && t != "send_file")
                || ["enrich_aws_", "enrich_http_", "enrich_dns_"]
                    .iter()
                    .any(|p| t.starts_with(p));
            let want = if network {
                Some(Power::Network)
            } else if t == "send_file" {
                Some(Power::Files)
            } else {
                None
            };
            assert_eq!(needs(t), want, "{t}");
        }
        assert_eq!(needs("string_equal_to"), None);
        // The kv stores, by their descriptors: those that keep or read files, the one that
        // calls AWS, and the one in memory.
        for name in ["mmdb", "csv_file", "sqlite"] {
            assert_eq!(needs(name), Some(Power::Files), "{name}");
        }
        assert_eq!(needs("aws_dynamodb"), Some(Power::Network));
        assert_eq!(needs("memory"), None);
        for store in sluice_transforms::kv_store::stores::infos() {
            let name = store.info.name;
            assert!(needs(name).is_some() || name == "memory", "{name}");
        }
    }

    #[test]
    fn checks_table() {
        let none = Trust::default();
        let all = Trust {
            env: true,
            files: true,
            network: true,
        };
        let kv = |t: &str| {
            json!({"transforms": [
                {"type": "object_copy", "settings": {}},
                {"type": "enrich_kv_store_item_get", "settings": {"kv_store": {"type": t, "settings": {"file": "/etc/shadow"}}}},
            ]})
        };
        let cases: Vec<(Value, Trust, Option<&str>)> = vec![
            (
                json!({"transforms": [{"type": "send_stdout", "settings": {}}]}),
                none,
                None,
            ),
            (
                kv("csv_file"),
                none,
                Some(
                    "transforms[1] (enrich_kv_store_item_get): its settings.kv_store (csv_file) reads or writes files, which sluice play does not allow unless it is started with --allow-files",
                ),
            ),
            (
                kv("csv_file"),
                Trust {
                    files: true,
                    ..none
                },
                None,
            ),
            (kv("memory"), none, None),
            // A file store whose file is a URL calls the network: --allow-files is not
            // enough (with the user's credentials, for s3:// and gs://).
            (
                json!({"transforms": [{"type": "enrich_kv_store_item_get", "settings": {"kv_store": {"type": "csv_file", "settings": {"file": "s3://their-bucket/secrets.csv"}}}}]}),
                Trust {
                    files: true,
                    ..none
                },
                Some(
                    "transforms[0] (enrich_kv_store_item_get): its settings.kv_store (csv_file) calls the network, which sluice play does not allow unless it is started with --allow-network",
                ),
            ),
            (
                json!({"transforms": [{"type": "enrich_kv_store_item_get", "settings": {"kv_store": {"type": "mmdb", "settings": {"file": "https://example.com/geo.mmdb"}}}}]}),
                Trust {
                    network: true,
                    ..none
                },
                Some("--allow-files"),
            ),
            (
                json!({"transforms": [{"type": "enrich_kv_store_item_get", "settings": {"kv_store": {"type": "text_file", "settings": {"file": "gs://b/list.txt"}}}}]}),
                Trust {
                    files: true,
                    network: true,
                    ..none
                },
                None,
            ),
            (
                kv("aws_dynamodb"),
                Trust {
                    files: true,
                    env: true,
                    ..none
                },
                Some("--allow-network"),
            ),
            (
                json!({"transforms": [{"type": "utility_secret", "settings": {"secret": {"type": "environment_variable", "settings": {"id": "s", "name": "HOME"}}}}]}),
                none,
                Some(
                    "transforms[0] (utility_secret): its settings.secret (environment_variable) reads environment variables, which sluice play does not allow unless it is started with --allow-env",
                ),
            ),
            (
                json!({"transforms": [{"type": "send_http_post", "settings": {"url": "http://x"}}]}),
                none,
                Some(
                    "transforms[0]: the send_http_post transform calls the network, which sluice play does not allow unless it is started with --allow-network",
                ),
            ),
            // Nested lists and tests are checked too.
            (
                json!({"transforms": [{"type": "meta_switch", "settings": {"cases": [{"transforms": [{"type": "send_file", "settings": {}}]}]}}]}),
                none,
                Some(
                    "transforms[0] (meta_switch): its settings.cases[0].transforms[0] (send_file) reads or writes files",
                ),
            ),
            (
                json!({"transforms": [], "tests": [{"transforms": [{"type": "send_aws_sqs", "settings": {}}]}]}),
                none,
                Some("tests[0].transforms[0]: the send_aws_sqs transform calls the network"),
            ),
            (kv("csv_file"), all, None),
        ];
        for (config, trust, want) in cases {
            let got = check(&config, trust).err().map(|e| e.to_string());
            match (got.as_deref(), want) {
                (None, None) => {}
                (Some(g), Some(w)) => assert!(g.starts_with(w) || g.contains(w), "{g}\nwant {w}"),
                (g, w) => panic!("{config}: got {g:?}, want {w:?}"),
            }
        }
    }
}
