//! Test-only transforms and a condition for the meta and utility tests: failure injection,
//! a recorder of what a stage saw, a fake send that holds messages until ctrl, and a
//! substring condition. They are registered, next to the real transforms, in [`registry`],
//! so inner lists in tests are built from JSON like any config.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use serde::Deserialize;
use sluice_engine::ack::{AckStatus, AckTracker};

use crate::kv_store::lock::ticket::{Copies, tickets};
use sluice_engine::{
    Build, Condition, ConfigError, InPlace, MapTransform, Message, Registry, StatefulTransform,
    StatelessTransform, TransformError, async_trait,
};

/// Every real transform plus the fixtures.
pub(crate) fn registry() -> Registry {
    let mut r = crate::registry();
    r.transform(
        &const { sluice_engine::TypeInfo::named("fixture_fail") },
        |b| Fail::build(b).map(Fail::into_transform),
    );
    r.map(
        &const { sluice_engine::TypeInfo::named("fixture_counter") },
        Counter::build,
    );
    r.stateful(
        &const { sluice_engine::TypeInfo::named("fixture_record") },
        Record::build,
    );
    r.stateful(
        &const { sluice_engine::TypeInfo::named("fixture_send") },
        Send::build,
    );
    r.stateless(
        &const { sluice_engine::TypeInfo::named("fixture_suffix") },
        Suffix::build,
    );
    r.condition(
        &const { sluice_engine::TypeInfo::named("fixture_contains") },
        Contains::build,
    );
    r
}

fn journals() -> &'static Mutex<HashMap<String, Vec<String>>> {
    static J: OnceLock<Mutex<HashMap<String, Vec<String>>>> = OnceLock::new();
    J.get_or_init(Default::default)
}

fn note(name: &str, entry: String) {
    journals()
        .lock()
        .unwrap()
        .entry(name.to_string())
        .or_default()
        .push(entry);
}

/// What the fixtures named `name` noted, in order (tests use unique names).
pub(crate) fn journal(name: &str) -> Vec<String> {
    journals()
        .lock()
        .unwrap()
        .get(name)
        .cloned()
        .unwrap_or_default()
}

fn text(m: &Message) -> String {
    if m.is_ctrl() {
        "<ctrl>".into()
    } else {
        String::from_utf8_lossy(m.data()).into_owned()
    }
}

/// A tracked data message.
pub(crate) fn tracked(data: &str) -> (Message, Arc<AckTracker>) {
    let (tracker, token) = AckTracker::new();
    let mut m = Message::new(data.as_bytes().to_vec());
    m.add_ack(token);
    (m, tracker)
}

/// The data of the non-ctrl messages.
pub(crate) fn datas(msgs: &[Message]) -> Vec<String> {
    msgs.iter().filter(|m| !m.is_ctrl()).map(text).collect()
}

/// Asserts a tracker's status with a readable message.
pub(crate) fn assert_status(t: &AckTracker, want: AckStatus, what: &str) {
    assert_eq!(t.status(), want, "{what}: {:?}", t.failure_reason());
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct FailSettings {
    message: String,
    /// Fail this many times, then pass; absent fails always.
    times: Option<u32>,
    stateful: bool,
    /// Journal name for the attempts.
    name: Option<String>,
}

/// Fails the first `times` messages it sees (ctrl too, when stateful).
struct Fail {
    s: FailSettings,
    seen: AtomicU32,
}

impl Fail {
    fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        Ok(Fail {
            s: b.settings()?,
            seen: AtomicU32::new(0),
        })
    }
}

#[async_trait]
impl StatefulTransform for Fail {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        let n = self.seen.fetch_add(1, Ordering::SeqCst);
        if let Some(name) = &self.s.name {
            note(name, text(&msg));
        }
        if self.s.times.is_none_or(|t| n < t) {
            return Err(TransformError::failed(self.s.message.clone()));
        }
        out.push(msg);
        Ok(())
    }
}

impl Fail {
    /// Built as a stateful transform only when what it runs is stateful.
    pub(crate) fn into_transform(self) -> sluice_engine::Transform {
        let stateful = self.s.stateful;
        sluice_engine::Transform::stateful_if(stateful, self)
    }
}

/// Appends `#<n>` to the data, n counting the data messages it has seen from 1.
struct Counter(AtomicU32);

impl Counter {
    fn build(_: &Build<'_>) -> Result<Self, ConfigError> {
        Ok(Counter(AtomicU32::new(0)))
    }
}

impl MapTransform for Counter {
    fn map(&self, msg: &mut Message) -> Result<InPlace, TransformError> {
        self.apply(msg).map(|()| InPlace::Keep)
    }
}

impl Counter {
    /// The work, on the message in place.
    fn apply(&self, msg: &mut Message) -> Result<(), TransformError> {
        let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
        let d = format!("{}#{n}", text(msg));
        msg.set_data(d.into_bytes());
        Ok(())
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RecordSettings {
    name: String,
    /// Emitted as a data message before each ctrl (a flush).
    emit_on_ctrl: Option<String>,
}

/// Stateful: notes every message it sees, ctrl as `<ctrl>`.
struct Record(RecordSettings);

impl Record {
    fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        Ok(Record(b.settings()?))
    }
}

#[async_trait]
impl StatefulTransform for Record {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        note(&self.0.name, text(&msg));
        if msg.is_ctrl()
            && let Some(e) = &self.0.emit_on_ctrl
        {
            out.push(Message::new(e.clone().into_bytes()));
        }
        out.push(msg);
        Ok(())
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct SendSettings {
    name: String,
    /// The first this-many flushes fail.
    fail_flushes: u32,
    /// Failed flushes may have delivered (a 5xx after the write applied).
    uncertain: bool,
    /// Flush when this many messages are held, not only at ctrl.
    flush_at: Option<usize>,
    /// With `fail_flushes`: only the held messages whose data contains this fail (the
    /// others are delivered), as a destination with per-record results fails some records.
    fail_matching: Option<String>,
}

/// A send: passes data on, keeps a copy until ctrl, then "delivers" (notes `sent:<data>`).
/// A failed flush marks what it held failed and keeps it queued, like the real sends. Under
/// a lock it does what the real sends do (`send::batcher`), with its name as its progress
/// id: numbers each locked message's copies, skips a copy an earlier attempt delivered
/// (notes `skipped:<data>`), records the copies it delivers, and does not send a copy whose
/// lease lapsed (notes `refused:<data>` and fails it).
struct Send {
    s: SendSettings,
    held: Mutex<Vec<(Message, Copies)>>,
    failures: AtomicU32,
}

impl Send {
    fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        Ok(Send {
            s: b.settings()?,
            held: Mutex::new(Vec::new()),
            failures: AtomicU32::new(0),
        })
    }

    /// "Delivers" `batch`: each message whose lease still allows it is noted `sent:`, its
    /// tokens accepted and its copies recorded; the others are noted `refused:` and fail.
    fn deliver(&self, batch: Vec<(Message, Copies)>) {
        let now = std::time::Instant::now();
        for (m, copies) in batch {
            if let Some(why) = copies.iter().find_map(|(t, _)| t.check_lease(now).err()) {
                note(&self.s.name, format!("refused:{}", text(&m)));
                m.fail_acks(&why);
                continue;
            }
            for t in m.acks() {
                t.mark_accepted();
            }
            for (t, c) in &copies {
                t.record_delivery(&self.s.name, *c);
            }
            note(&self.s.name, format!("sent:{}", text(&m)));
        }
    }
}

#[async_trait]
impl StatefulTransform for Send {
    async fn transform(&self, msg: Message, out: &mut Vec<Message>) -> Result<(), TransformError> {
        if !msg.is_ctrl() {
            let copies: Copies = tickets(msg.acks())
                .map(|t| {
                    let c = t.next_copy(&self.s.name);
                    (t, c)
                })
                .collect();
            if !copies.is_empty()
                && copies
                    .iter()
                    .all(|(t, c)| t.delivered_before(&self.s.name, *c))
            {
                note(&self.s.name, format!("skipped:{}", text(&msg)));
                out.push(msg);
                return Ok(());
            }
            let full = {
                let mut held = self.held.lock().unwrap();
                held.push((msg.clone(), copies));
                self.s.flush_at.is_some_and(|n| held.len() >= n)
            };
            out.push(msg);
            if full {
                let mut flushed = Vec::new();
                self.transform(Message::ctrl(), &mut flushed).await?;
            }
            return Ok(());
        }
        let mut batch = std::mem::take(&mut *self.held.lock().unwrap());
        let failing = self
            .s
            .fail_matching
            .as_ref()
            .is_none_or(|f| batch.iter().any(|(m, _)| text(m).contains(f.as_str())));
        if failing && self.failures.fetch_add(1, Ordering::SeqCst) < self.s.fail_flushes {
            // With `fail_matching`, what does not match is delivered now.
            if let Some(f) = &self.s.fail_matching {
                let (bad, good): (Vec<_>, Vec<_>) = batch
                    .into_iter()
                    .partition(|(m, _)| text(m).contains(f.as_str()));
                self.deliver(good);
                batch = bad;
            }
            for (m, _) in &batch {
                if self.s.uncertain {
                    for t in m.acks() {
                        t.mark_uncertain();
                    }
                }
                m.fail_acks("delivery failed");
            }
            *self.held.lock().unwrap() = batch;
            return Err(TransformError::failed("delivery failed"));
        }
        self.deliver(batch);
        out.push(msg);
        Ok(())
    }
    async fn abort(&self, reason: &str) {
        for (m, _) in std::mem::take(&mut *self.held.lock().unwrap()) {
            m.fail_acks(reason);
            note(&self.s.name, format!("aborted:{}", text(&m)));
        }
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct SuffixSettings {
    suffix: String,
}

/// Appends `suffix` to the data.
struct Suffix(SuffixSettings);

impl Suffix {
    fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        Ok(Suffix(b.settings()?))
    }
}

#[async_trait]
impl StatelessTransform for Suffix {
    async fn transform(
        &self,
        mut msg: Message,
        out: &mut Vec<Message>,
    ) -> Result<(), TransformError> {
        let d = format!("{}{}", text(&msg), self.0.suffix);
        msg.set_data(d.into_bytes());
        out.push(msg);
        Ok(())
    }
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ContainsSettings {
    value: String,
    /// Evaluating fails instead.
    error: bool,
}

/// The data contains `value`; false on ctrl.
struct Contains(ContainsSettings);

impl Contains {
    fn build(b: &Build<'_>) -> Result<Self, ConfigError> {
        Ok(Contains(b.settings()?))
    }
}

impl Condition for Contains {
    fn test(&self, msg: &Message) -> Result<bool, TransformError> {
        if self.0.error {
            return Err(TransformError::Condition("cannot evaluate".into()));
        }
        Ok(!msg.is_ctrl() && text(msg).contains(&self.0.value))
    }
}
