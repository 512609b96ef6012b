//! `enrich_http_get`: a `GET` to `url`, the answer's body written at `object.target_key`
//! or, without one, as the new data.
//!
//! Substation compatibility (`reference/substation.md` §2.1 row 12): the same type name and
//! settings (`url`, `headers`, `object.source_key`, `object.target_key`). `${DATA}` in the
//! URL is the text of the value at `object.source_key` (or the whole data when it is not
//! set), inserted as it is (not URL-encoded, as in Substation); a message without that
//! value passes through unchanged when the URL uses `${DATA}`. `${SECRET:id}` in the URL
//! and the headers comes from `utility_secret` ([`sluice_platform::secrets`]). A JSON body is
//! compacted as Go's `json.Compact` does it ([`http::body_data`]); with a target key it is
//! written as JSON (anything else with SJSON's typing of the bytes).
//!
//! sluice's own settings: `request.timeout`, `retry.count`, `retry.delay` and
//! `accept_client_errors`; how requests are retried and where sluice differs from
//! Substation (4xx is an error) is in [`sluice_platform::http`].

use serde::Deserialize;
use sluice_engine::settings::ObjectSettings;
use sluice_engine::{
    Build, ConfigError, Key, Message, StatelessTransform, TransformError, Value, async_trait,
};

use sluice_platform::http::{self, Endpoint, HttpOptions, RequestSettings, RetrySettings};

/// Settings of `enrich_http_get`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The URL (`${DATA}`, `${SECRET:id}`).
    pub url: Option<String>,
    /// Request headers (`${SECRET:id}`).
    pub headers: Option<Value>,
    /// `source_key` (what `${DATA}` is) and `target_key` (where the body goes).
    pub object: ObjectSettings,
    /// `timeout` of one attempt.
    pub request: RequestSettings,
    /// Retries of transport errors, 429 and 5xx.
    pub retry: RetrySettings,
    /// Treat 4xx answers as success (Substation's behaviour).
    pub accept_client_errors: bool,
}

/// The `enrich_http_get` transform.
#[derive(Debug)]
pub(crate) struct EnrichHttpGet {
    endpoint: Endpoint,
    source: Option<Key>,
    target: Option<Key>,
}

impl EnrichHttpGet {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        let endpoint = Endpoint::build(
            b,
            HttpOptions {
                url: s.url,
                headers: s.headers,
                request: s.request,
                retry: s.retry,
                accept_client_errors: s.accept_client_errors,
            },
        )?;
        Ok(EnrichHttpGet {
            endpoint,
            source: b.opt_key("object.source_key", &s.object.source_key)?,
            target: b.opt_key("object.target_key", &s.object.target_key)?,
        })
    }
}

#[async_trait]
impl StatelessTransform for EnrichHttpGet {
    async fn transform(
        &self,
        mut msg: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            out.push(msg);
            return Ok(());
        }
        let Some(data) = self.endpoint.data_of(self.source.as_ref(), &msg) else {
            out.push(msg);
            return Ok(());
        };
        let resp = self.endpoint.call("GET", data.as_deref(), None).await?;
        match &self.target {
            Some(t) => msg.set(t, http::body_value(&resp.body))?,
            None => msg.set_data(http::body_data(resp.body)),
        }
        out.push(msg);
        Ok(())
    }
}

/// What registers the `enrich_http_get` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "enrich_http_get",
    aliases: &[],
    library: "sub.tf.enrich.http.get",
    summary: "the body of a GET to a URL with `${DATA}` and `${SECRET:id}`",
    reach: sluice_engine::Reach::Network,
    example: r#"{"url": "http://127.0.0.1:9/${DATA}"}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};
    use sluice_platform::http::test_server::{Reply, Server};

    fn build(settings: sluice_engine::Value) -> sluice_engine::Transform {
        testing::build(
            &registry(),
            json!({"type": "enrich_http_get", "settings": settings}),
        )
        .unwrap()
    }

    #[test]
    fn settings_table() {
        let r = registry();
        testing::build(
            &r,
            json!({"type": "enrich_http_get", "settings": {"url": "https://h/${DATA}", "headers": {"A": "b"}}}),
        )
        .unwrap();
        testing::assert_config_errors(
            &r,
            "enrich_http_get",
            &[
                (json!({}), "settings.url: missing required option"),
                (
                    json!({"url": "ftp://h/x"}),
                    "settings.url: \"ftp://h/x\" is not an http:// or https:// URL",
                ),
                (
                    json!({"url": "https://h/${SECRET:x"}),
                    "settings.url: \"https://h/${SECRET:x\": `${SECRET:` without a closing `}`",
                ),
                (
                    json!({"url": "https://h", "headers": {"A": 1}}),
                    "settings.headers.A: a header value must be a string",
                ),
                (
                    json!({"url": "https://h", "headers": {"bad name": "x"}}),
                    "settings.headers.bad name: \"bad name\" is not a valid header name",
                ),
                (
                    json!({"url": "https://h", "headers": [{"key": "A"}]}),
                    "settings.headers[0]: a header in a list must be an object",
                ),
                (
                    json!({"url": "https://h", "headers": "x"}),
                    "settings.headers: must be an object",
                ),
                (
                    json!({"url": "https://h", "request": {"timeout": "soon"}}),
                    "settings.request.timeout",
                ),
                (
                    json!({"url": "https://h", "request": {"timeout": "0s"}}),
                    "settings.request.timeout: must be more than 0",
                ),
                (
                    json!({"url": "https://h", "object": {"source_key": "a.#("}}),
                    "settings.object.source_key",
                ),
            ],
        );
    }

    #[test]
    fn answers_are_written_by_mode() {
        let server = Server::start(|req| {
            let body = match req.path.as_str() {
                "/user/7" => r#"{ "name" : "ann", "id": 7 }"#,
                "/text/x" => "plain words",
                "/echo-ua" => return Reply::ok(req.header("user-agent").unwrap_or("")),
                _ => return Reply::status(404, "no such thing"),
            };
            Reply::ok(body)
        });
        let base = server.url();
        // (settings, input, output)
        let cases = [
            (
                json!({"url": format!("{base}/user/${{DATA}}"), "object": {"source_key": "id", "target_key": "user"}}),
                r#"{"id":7}"#,
                r#"{"id":7,"user":{"name":"ann","id":7}}"#,
            ),
            (
                json!({"url": format!("{base}/user/${{DATA}}")}),
                "7",
                r#"{"name":"ann","id":7}"#,
            ),
            (
                json!({"url": format!("{base}/text/${{DATA}}"), "object": {"source_key": "k", "target_key": "t"}}),
                r#"{"k":"x"}"#,
                r#"{"k":"x","t":"plain words"}"#,
            ),
            // No ${DATA}: the same URL for every message; a missing source does not matter.
            (
                json!({"url": format!("{base}/text/x"), "object": {"target_key": "t"}}),
                r#"{"a":1}"#,
                r#"{"a":1,"t":"plain words"}"#,
            ),
            // ${DATA} from a missing value: passes through, no request.
            (
                json!({"url": format!("{base}/user/${{DATA}}"), "object": {"source_key": "nope", "target_key": "u"}}),
                r#"{"a":1}"#,
                r#"{"a":1}"#,
            ),
            (
                json!({"url": format!("{base}/echo-ua")}),
                "x",
                concat!("sluice/", env!("CARGO_PKG_VERSION")),
            ),
        ];
        for (settings, input, want) in cases {
            let got = testing::run(build(settings.clone()), &[input]).unwrap();
            assert_eq!(got, [want], "{settings}");
        }
        assert_eq!(
            server
                .requests()
                .iter()
                .filter(|r| r.path == "/user/nope")
                .count(),
            0
        );
    }

    #[test]
    fn headers_carry_secrets_that_errors_never_show() {
        sluice_platform::secrets::store(
            "get-token",
            sluice_platform::secrets::Secret::new("tok-9f8e7d"),
            std::time::Duration::ZERO,
        );
        let server = Server::start(|req| match req.header("authorization") {
            Some("Bearer tok-9f8e7d") => Reply::ok("{}"),
            Some(other) => Reply::status(403, &format!("forbidden: {other}")),
            None => Reply::status(401, "who are you"),
        });
        let base = server.url();
        let ok = build(
            json!({"url": format!("{base}/a"), "headers": {"Authorization": "Bearer ${SECRET:get-token}"}}),
        );
        assert_eq!(testing::run(ok, &["x"]).unwrap(), ["{}"]);
        // The server echoes the header in its 403 body; the request carried a secret (in its
        // URL), so the error leaves the body out.
        let wrong = build(
            json!({"url": format!("{base}/a?k=${{SECRET:get-token}}"), "headers": [{"key": "Authorization", "value": "Bearer tok-9f8e7d-old"}]}),
        );
        let e = testing::run(wrong, &["x"]).unwrap_err().to_string();
        assert!(!e.contains("tok-9f8e7d"), "{e}");
        assert!(
            e.ends_with(&format!(
                "GET {base}/a?k=${{SECRET:get-token}}: HTTP 403 (body omitted: the request carried a secret)"
            )),
            "{e}"
        );
        // A secret that is not loaded is an error naming it.
        let missing =
            build(json!({"url": format!("{base}/a"), "headers": {"X": "${SECRET:get-nothing}"}}));
        let e = testing::run(missing, &["x"]).unwrap_err().to_string();
        assert!(
            e.contains("header X: secret \"get-nothing\" is not loaded"),
            "{e}"
        );
    }

    #[test]
    fn compliance() {
        let server = Server::start(|_| Reply::ok("{}"));
        testing::check_type_compliance(
            &registry(),
            "enrich_http_get",
            json!({"url": format!("{}/c", server.url())}),
        );
    }
}
