//! `send_http_post`: one `POST` per item of each batch to `url`.
//!
//! Substation compatibility (`reference/substation.md` §2.1 row 60): the same type name and
//! settings (`url`, `headers` (the library's `hdr`), `batch`, `auxiliary_transforms`,
//! `object.batch_key`); the answer's body is discarded. `${SECRET:id}` in the URL and the
//! headers comes from `utility_secret` and is filled for every request. Only the headers
//! the config lists are sent (no `Content-Type` is added), as Substation's client does.
//!
//! Items of a batch are posted one after the other, in order. A request that still fails
//! after its retries ([`sluice_platform::http`]: transport errors, timeouts, 429 and 5xx but 501)
//! stops the batch: the items before it are delivered (their messages' acknowledgements
//! succeed), it and the ones after it stay queued (see the batcher) and the error names the
//! URL and the answer, so a retry posts exactly what was not delivered, in order.
//!
//! Where sluice differs from Substation: a 4xx answer is an error unless
//! `accept_client_errors` is true (Substation counts it as delivered, so a rejected item
//! is lost silently); on retry only undelivered items are posted again (Substation posts
//! the whole batch again). sluice's own settings: `request.timeout`, `retry.count`,
//! `retry.delay`, `accept_client_errors`.

use serde::Deserialize;
use sluice_engine::settings::{BatchSettings, ObjectSettings};
use sluice_engine::{Build, ConfigError, Value, async_trait};

use super::batcher::{Caps, Destination, Outgoing, SendError, SendOptions, Sender};
use sluice_platform::http::{Endpoint, HttpOptions, RequestSettings, RetrySettings};

/// Settings of `send_http_post`.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Settings {
    /// The URL (`${SECRET:id}`).
    pub url: Option<String>,
    /// Request headers (`${SECRET:id}`).
    pub headers: Option<Value>,
    /// Batch limits: when posts happen (each item is one post).
    pub batch: BatchSettings,
    /// Transforms run over each batch before it is sent.
    pub auxiliary_transforms: Option<Value>,
    /// `batch_key`.
    pub object: ObjectSettings,
    /// `timeout` of one attempt.
    pub request: RequestSettings,
    /// Retries of transport errors, 429 and 5xx.
    pub retry: RetrySettings,
    /// Treat 4xx answers as success (Substation's behaviour).
    pub accept_client_errors: bool,
}

/// An HTTP endpoint that takes one item per `POST`, as a destination.
#[derive(Debug)]
pub(crate) struct HttpPost {
    endpoint: Endpoint,
}

#[async_trait]
impl Destination for HttpPost {
    async fn send(&self, batch: &Outgoing) -> Result<(), SendError> {
        for (i, item) in batch.items.iter().enumerate() {
            if let Err(e) = self.endpoint.call("POST", None, Some(item)).await {
                return Err(SendError::items((i..batch.items.len()).collect(), e));
            }
        }
        Ok(())
    }
}

/// The `send_http_post` transform.
pub(crate) type SendHttpPost = Sender<HttpPost>;

impl Sender<HttpPost> {
    /// Builds it from its settings.
    pub(crate) fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        let s: Settings = b.settings()?;
        if s.url.as_deref().is_some_and(|u| u.contains("${DATA}")) {
            return Err(b.field_error(
                "url",
                "${DATA} is not available in send_http_post (each item is the body)",
            ));
        }
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
        Sender::new(
            b,
            SendOptions {
                batch: s.batch,
                auxiliary_transforms: s.auxiliary_transforms,
                object: s.object,
            },
            Caps::NONE,
            HttpPost { endpoint },
        )
    }
}

/// What registers the `send_http_post` transform and lists it in the reference index.
pub(crate) const INFO: sluice_engine::TypeInfo = sluice_engine::TypeInfo {
    name: "send_http_post",
    aliases: &[],
    library: "sub.tf.send.http.post",
    summary: "one POST per item, with retries",
    reach: sluice_engine::Reach::Network,
    example: r#"{"url": "http://127.0.0.1:9/"}"#,
};

#[cfg(test)]
mod tests {
    use crate::registry;
    use sluice_engine::ack::{AckStatus, AckTracker};
    use sluice_engine::{Message, Pipeline, json, testing};
    use sluice_platform::http::test_server::{Reply, Server};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn build(settings: sluice_engine::Value) -> sluice_engine::Transform {
        testing::build(
            &registry(),
            json!({"type": "send_http_post", "settings": settings}),
        )
        .unwrap()
    }

    #[test]
    fn settings_table() {
        testing::assert_config_errors(
            &registry(),
            "send_http_post",
            &[
                (json!({}), "settings.url: missing required option"),
                (
                    json!({"url": "https://h/${DATA}"}),
                    "settings.url: ${DATA} is not available",
                ),
                (
                    json!({"url": "https://h", "headers": {"A": null}}),
                    "settings.headers.A",
                ),
                (
                    json!({"url": "https://h", "auxiliary_transforms": [{"type": "nope"}]}),
                    "nope",
                ),
            ],
        );
    }

    #[test]
    fn one_post_per_item_with_headers_and_aux_transforms() {
        sluice_platform::secrets::store(
            "send-key",
            sluice_platform::secrets::Secret::new("k-123"),
            std::time::Duration::ZERO,
        );
        let server = Server::start(|_| Reply::ok("ignored"));
        let out = testing::run(
            build(
                json!({"url": format!("{}/in?key=${{SECRET:send-key}}", server.url()),
                         "headers": {"X-Team": "ops"}, "batch": {"count": 2}}),
            ),
            &[r#"{"a":1}"#, "text", r#"{"a":3}"#],
        )
        .unwrap();
        assert_eq!(
            out,
            [r#"{"a":1}"#, "text", r#"{"a":3}"#],
            "data passes through"
        );
        let reqs = server.requests();
        let got: Vec<(String, String, String, String)> = reqs
            .iter()
            .map(|r| {
                (
                    r.path.clone(),
                    r.header("x-team").unwrap_or("").to_string(),
                    r.header("content-type").unwrap_or("").to_string(),
                    r.text(),
                )
            })
            .collect();
        let want = |b: &str, t: &str| {
            (
                "/in?key=k-123".to_string(),
                "ops".to_string(),
                t.to_string(),
                b.to_string(),
            )
        };
        assert_eq!(
            got,
            [
                want(r#"{"a":1}"#, ""),
                want("text", ""),
                want(r#"{"a":3}"#, "")
            ]
        );

        let server = Server::start(|_| Reply::ok(""));
        testing::run(
            build(json!({"url": server.url(),
                         "auxiliary_transforms": [{"type": "aggregate_to_string", "settings": {"separator": "\n"}}]})),
            &["a", "b", "c"],
        )
        .unwrap();
        let bodies: Vec<String> = server.requests().iter().map(|r| r.text()).collect();
        assert_eq!(bodies, ["a\nb\nc"]);
    }

    #[test]
    fn a_failed_post_keeps_it_and_the_rest_and_acks_the_ones_before() {
        // The third request fails for good (a 400), the others succeed.
        let n = Arc::new(AtomicUsize::new(0));
        let c = n.clone();
        let server = Server::start(move |req| {
            c.fetch_add(1, Ordering::SeqCst);
            if req.text() == "c" {
                Reply::status(400, "c is not welcome")
            } else {
                Reply::ok("")
            }
        });
        let t = build(json!({"url": server.url(), "retry": {"count": 0}}));
        let p = Pipeline::new(vec![(Arc::from("send_http_post"), t)]);
        let mut trackers = Vec::new();
        let mut msgs = Vec::new();
        for d in ["a", "b", "c", "d"] {
            let (tracker, token) = AckTracker::new();
            let mut m = Message::new(d.as_bytes().to_vec());
            m.add_ack(token);
            trackers.push(tracker);
            msgs.push(m);
        }
        testing::block_on(p.apply(msgs)).unwrap();
        let e = testing::block_on(p.apply(vec![Message::ctrl()]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("HTTP 400: c is not welcome"), "{e}");
        assert_eq!(
            n.load(Ordering::SeqCst),
            3,
            "d is not posted after c failed"
        );
        let status: Vec<AckStatus> = trackers.iter().map(|t| t.status()).collect();
        assert_eq!(status[0], AckStatus::Delivered);
        assert_eq!(status[1], AckStatus::Delivered);
        assert_ne!(status[2], AckStatus::Delivered);
        assert_ne!(status[3], AckStatus::Delivered);
        let bodies: Vec<String> = server.requests().iter().map(|r| r.text()).collect();
        assert_eq!(bodies, ["a", "b", "c"]);
    }

    #[test]
    fn compliance() {
        let server = Server::start(|_| Reply::ok(""));
        testing::check_type_compliance(&registry(), "send_http_post", json!({"url": server.url()}));
    }
}
