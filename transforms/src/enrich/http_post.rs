//! `enrich_http_post`: a `POST` of the value at `object.body_key` to `url`, the answer's
//! body written at `object.target_key` (or discarded without one).
//!
//! Substation compatibility (`reference/substation.md` §2.1 row 13): the same type name and
//! settings (`url`, `headers`, `object.body_key` (required), `object.source_key` for
//! `${DATA}` in the URL, `object.target_key`); the library also accepts a top-level
//! `body_key`. The body is the value's text (an object or array as compact JSON, a string
//! without its quotes); a message without it passes through unchanged, as does one without
//! the source value when the URL uses `${DATA}`. Only the headers the config lists are
//! sent (no `Content-Type` is added), as Substation's client does.
//!
//! sluice's own settings: `request.timeout`, `retry.count`, `retry.delay` and
//! `accept_client_errors`; how requests are retried and where sluice differs from
//! Substation (4xx is an error) is in [`sluice_platform::http`].

use serde::Deserialize;
use sluice_engine::{
    Build, ConfigError, Key, Message, StatelessTransform, TransformError, Value, async_trait, value,
};

use sluice_platform::http::{self, Endpoint, HttpOptions, RequestSettings, RetrySettings};

/// `object` of `enrich_http_post`: the usual keys and `body_key`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct PostObject {
    /// What `${DATA}` in the URL is.
    pub source_key: Option<String>,
    /// Where the answer's body goes.
    pub target_key: Option<String>,
    /// The value that is the request's body.
    pub body_key: Option<String>,
}

/// Settings of `enrich_http_post`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The URL (`${DATA}`, `${SECRET:id}`).
    pub url: Option<String>,
    /// Request headers (`${SECRET:id}`).
    pub headers: Option<Value>,
    /// `body_key`, `source_key`, `target_key`.
    pub object: PostObject,
    /// `timeout` of one attempt.
    pub request: RequestSettings,
    /// Retries of transport errors, 429 and 5xx.
    pub retry: RetrySettings,
    /// Treat 4xx answers as success (Substation's behaviour).
    pub accept_client_errors: bool,
}

/// The `enrich_http_post` transform.
#[derive(Debug)]
pub(crate) struct EnrichHttpPost {
    endpoint: Endpoint,
    body: Key,
    source: Option<Key>,
    target: Option<Key>,
}

impl EnrichHttpPost {
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
        let body = b
            .opt_key("object.body_key", &s.object.body_key)?
            .ok_or_else(|| {
                b.field_error(
                    "object.body_key",
                    "missing required option: the key whose value is the request's body",
                )
            })?;
        Ok(EnrichHttpPost {
            endpoint,
            body,
            source: b.opt_key("object.source_key", &s.object.source_key)?,
            target: b.opt_key("object.target_key", &s.object.target_key)?,
        })
    }
}

#[async_trait]
impl StatelessTransform for EnrichHttpPost {
    async fn transform(
        &self,
        mut msg: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        if msg.is_ctrl() {
            out.push(msg);
            return Ok(());
        }
        let Some(body) = msg.get(&self.body).map(|v| value::to_text(&v).into_owned()) else {
            out.push(msg);
            return Ok(());
        };
        let Some(data) = self.endpoint.data_of(self.source.as_ref(), &msg) else {
            out.push(msg);
            return Ok(());
        };
        let resp = self
            .endpoint
            .call("POST", data.as_deref(), Some(body.as_bytes()))
            .await?;
        if let Some(t) = &self.target {
            msg.set(t, http::body_value(&resp.body))?;
        }
        out.push(msg);
        Ok(())
    }
}

/// What registers the `enrich_http_post` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "enrich_http_post",
    aliases: &[],
    library: "sub.tf.enrich.http.post",
    summary: "the answer to a POST of a value",
    reach: sluice_engine::Reach::Network,
    example: r#"{"url": "http://127.0.0.1:9/", "object": {"body_key": "b"}}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::{json, testing};
    use sluice_platform::http::test_server::{Reply, Server};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    fn build(settings: sluice_engine::Value) -> sluice_engine::Transform {
        testing::build(
            &registry(),
            json!({"type": "enrich_http_post", "settings": settings}),
        )
        .unwrap()
    }

    #[test]
    fn settings_table() {
        testing::assert_config_errors(
            &registry(),
            "enrich_http_post",
            &[
                (
                    json!({"object": {"body_key": "b"}}),
                    "settings.url: missing required option",
                ),
                (
                    json!({"url": "https://h"}),
                    "settings.object.body_key: missing required option",
                ),
                (
                    json!({"url": "https://h", "object": {"body_key": "b", "target_key": "x.#("}}),
                    "settings.object.target_key",
                ),
                (
                    json!({"url": "https://h", "object": {"body_key": "b"}, "retry": {"count": -1}}),
                    "settings.retry.count",
                ),
            ],
        );
    }

    #[test]
    fn the_body_goes_out_and_the_answer_comes_back() {
        let server = Server::start(|req| {
            Reply::ok(&format!(
                r#"{{"path":"{}","type":"{}","got":{:?}}}"#,
                req.path,
                req.header("content-type").unwrap_or(""),
                req.text()
            ))
        });
        let base = server.url();
        // (settings, input, output)
        let cases = [
            (
                json!({"url": format!("{base}/p"), "object": {"body_key": "b", "target_key": "r"}}),
                r#"{"b":{"x":[1, 2]}}"#,
                r#"{"b":{"x":[1, 2]},"r":{"path":"/p","type":"","got":"{\"x\":[1, 2]}"}}"#,
            ),
            (
                json!({"url": format!("{base}/p/${{DATA}}"), "object": {"body_key": "b", "source_key": "id", "target_key": "r"}}),
                r#"{"b":"plain","id":"42"}"#,
                r#"{"b":"plain","id":"42","r":{"path":"/p/42","type":"","got":"plain"}}"#,
            ),
            // Without a target the answer is discarded.
            (
                json!({"url": format!("{base}/p"), "object": {"body_key": "b"}}),
                r#"{"b":1}"#,
                r#"{"b":1}"#,
            ),
            // A configured Content-Type wins.
            (
                json!({"url": format!("{base}/p"), "headers": {"Content-Type": "text/plain"}, "object": {"body_key": "b", "target_key": "r"}}),
                r#"{"b":[true]}"#,
                r#"{"b":[true],"r":{"path":"/p","type":"text/plain","got":"[true]"}}"#,
            ),
            // No body: passes through without a request.
            (
                json!({"url": format!("{base}/none"), "object": {"body_key": "b", "target_key": "r"}}),
                r#"{"a":1}"#,
                r#"{"a":1}"#,
            ),
        ];
        for (settings, input, want) in cases {
            let got = testing::run(build(settings.clone()), &[input]).unwrap();
            assert_eq!(got, [want], "{settings}");
        }
        assert!(server.requests().iter().all(|r| r.method == "POST"));
        assert!(!server.requests().iter().any(|r| r.path == "/none"));
    }

    /// A server that answers `fails` with `status` (and then 200), counting requests.
    fn flaky(fails: usize, reply: Reply) -> (Server, Arc<AtomicUsize>) {
        let n = Arc::new(AtomicUsize::new(0));
        let c = n.clone();
        let server = Server::start(move |_| {
            if c.fetch_add(1, Ordering::SeqCst) < fails {
                reply.clone()
            } else {
                Reply::ok(r#"{"ok":true}"#)
            }
        });
        (server, n)
    }

    fn post(url: String, extra: sluice_engine::Value) -> sluice_engine::Transform {
        let mut s = json!({"url": url, "object": {"body_key": "b", "target_key": "r"}, "retry": {"delay": "1ms"}});
        if let (sluice_engine::Value::Object(m), sluice_engine::Value::Object(extra)) =
            (&mut s, extra)
        {
            for (k, v) in extra {
                m.insert(k, v);
            }
        }
        build(s)
    }

    #[test]
    fn retries_on_5xx_429_and_transport_errors() {
        // (reply that fails, failures, count, succeeds, attempts)
        let cases = [
            (Reply::status(503, "busy"), 2, 4, true, 3),
            (Reply::status(500, "oops"), 4, 4, true, 5),
            (Reply::status(500, "oops"), 5, 4, false, 5),
            (
                Reply::status(429, "slow down").header("retry-after", "0"),
                1,
                4,
                true,
                2,
            ),
            (Reply::status(502, ""), 1, 0, false, 1),
            // Not retried: 501 and 4xx.
            (Reply::status(501, "no"), 1, 4, false, 1),
            (Reply::status(404, "gone"), 1, 4, false, 1),
        ];
        for (reply, fails, count, ok, attempts) in cases {
            let (server, n) = flaky(fails, reply.clone());
            let t = post(
                server.url(),
                json!({"retry": {"count": count, "delay": "1ms"}}),
            );
            let got = testing::run(t, &[r#"{"b":1}"#]);
            assert_eq!(got.is_ok(), ok, "{reply:?}: {got:?}");
            assert_eq!(n.load(Ordering::SeqCst), attempts, "{reply:?}");
        }
        let (server, _) = flaky(9, Reply::status(500, "oops"));
        let e = testing::run(
            post(server.url(), json!({"retry": {"count": 2, "delay": "1ms"}})),
            &[r#"{"b":1}"#],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.ends_with(&format!(
                "POST {}: HTTP 500: oops (after 3 attempts)",
                server.url()
            )),
            "{e}"
        );

        // Nothing listens: a transport error, retried, then named.
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        let e = testing::run(
            post(url.clone(), json!({"retry": {"count": 1, "delay": "1ms"}})),
            &[r#"{"b":1}"#],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains(&format!("POST {url}: request failed")), "{e}");
        assert!(e.ends_with("(after 2 attempts)"), "{e}");
    }

    #[test]
    fn client_errors_are_errors_unless_accepted() {
        let (server, _) = flaky(usize::MAX, Reply::status(400, r#"{"error":"bad field"}"#));
        let e = testing::run(post(server.url(), json!({})), &[r#"{"b":1}"#])
            .unwrap_err()
            .to_string();
        assert!(e.ends_with(r#"HTTP 400: {"error":"bad field"}"#), "{e}");
        let got = testing::run(
            post(server.url(), json!({"accept_client_errors": true})),
            &[r#"{"b":1}"#],
        )
        .unwrap();
        assert_eq!(
            got,
            [r#"{"b":1,"r":{"error":"bad field"}}"#],
            "Substation's behaviour"
        );
        let (server, _) = flaky(usize::MAX, Reply::status(302, "").header("location", "/x"));
        let e = testing::run(post(server.url(), json!({})), &[r#"{"b":1}"#])
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("HTTP 302 (redirects are not followed)"), "{e}");
    }

    #[test]
    fn a_slow_answer_times_out_and_is_retried() {
        let (server, n) = flaky(1, Reply::ok("late").after(Duration::from_millis(700)));
        let started = Instant::now();
        let got = testing::run(
            post(
                server.url(),
                json!({"request": {"timeout": "200ms"}, "retry": {"count": 1, "delay": "1ms"}}),
            ),
            &[r#"{"b":1}"#],
        )
        .unwrap();
        assert_eq!(got, [r#"{"b":1,"r":{"ok":true}}"#]);
        assert_eq!(n.load(Ordering::SeqCst), 2);
        assert!(
            started.elapsed() < Duration::from_millis(650),
            "{:?}",
            started.elapsed()
        );

        let (server, _) = flaky(
            usize::MAX,
            Reply::ok("late").after(Duration::from_millis(500)),
        );
        let e = testing::run(
            post(
                server.url(),
                json!({"request": {"timeout": "100ms"}, "retry": {"count": 0}}),
            ),
            &[r#"{"b":1}"#],
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.ends_with("no complete answer within the timeout of 100ms"),
            "{e}"
        );
    }

    #[test]
    fn compliance() {
        let server = Server::start(|_| Reply::ok("{}"));
        testing::check_type_compliance(
            &registry(),
            "enrich_http_post",
            json!({"url": server.url(), "object": {"body_key": "b"}}),
        );
    }
}
