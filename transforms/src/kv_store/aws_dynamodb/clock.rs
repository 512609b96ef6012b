//! How far this host's clock is from the lock table's, measured from DynamoDB's answers.
//!
//! Leases are written by one host's clock and read by another's, so the lock tolerates a
//! bounded skew between the processes sharing a table (`clock_skew`; see
//! `sluice_lock_protocol`). Every DynamoDB answer, an error included, carries the service's
//! time in its HTTP `Date` header (one-second resolution), which bounds this host's offset
//! from it: the answer was made between the request's sending and the answer's arrival, by
//! this host's clock, at a service time between the header's second and the next. With
//! `sent` and `received` read from this host's clock and `date` from the header, the offset
//! (this host's clock less the service's) lies in `(sent - date - 1 s, received - date]`.
//! Successive answers are intersected, which narrows the interval to a fraction of a
//! second; an answer that does not meet the interval (this host's clock was stepped) starts
//! a new one. The lock refuses to take keys while the whole interval is past half the
//! tolerated skew (two hosts each within half differ by at most the whole), so a host whose
//! clock runs ahead by more than that, and the measurement's width, never takes over a live
//! owner's key.

use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::config::interceptors::{
    BeforeDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_sdk_dynamodb::config::{ConfigBag, Intercept, RuntimeComponents};
use aws_sdk_dynamodb::error::BoxError;
use aws_smithy_types::config_bag::{Storable, StoreReplace};

use crate::kv_store::lock::ClockOffset;

/// The offsets measured so far (see the module documentation).
#[derive(Debug, Default)]
pub(crate) struct StoreClock {
    offset: Mutex<Option<ClockOffset>>,
}

impl StoreClock {
    /// The current interval, once an answer was seen.
    pub(crate) fn offset(&self) -> Option<ClockOffset> {
        *self.offset.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes in one answer's interval.
    pub(crate) fn observe(&self, seen: ClockOffset) {
        let mut current = self.offset.lock().unwrap_or_else(|p| p.into_inner());
        *current = Some(match *current {
            Some(c) if c.lo_ms <= seen.hi_ms && seen.lo_ms <= c.hi_ms => ClockOffset {
                lo_ms: c.lo_ms.max(seen.lo_ms),
                hi_ms: c.hi_ms.min(seen.hi_ms),
            },
            _ => seen,
        });
    }
}

/// When an attempt's request went out, by this host's clock (epoch ms).
#[derive(Debug, Clone, Copy)]
struct SentAt(i64);

impl Storable for SentAt {
    type Storer = StoreReplace<Self>;
}

/// The interceptor that measures (see the module documentation).
#[derive(Debug, Clone)]
pub(crate) struct ClockWatch(pub(crate) Arc<StoreClock>);

pub(super) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

impl Intercept for ClockWatch {
    fn name(&self) -> &'static str {
        "sluice-store-clock"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        cfg.interceptor_state().store_put(SentAt(now_ms()));
        Ok(())
    }

    fn read_before_deserialization(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let received = now_ms();
        let (Some(SentAt(sent)), Some(date)) = (
            cfg.load::<SentAt>().copied(),
            context.response().headers().get("date"),
        ) else {
            return Ok(());
        };
        if let Some(date_ms) = parse_http_date(date) {
            self.0.observe(offset(sent, received, date_ms));
        }
        Ok(())
    }
}

/// The offset interval of one answer (see the module documentation).
fn offset(sent: i64, received: i64, date_ms: i64) -> ClockOffset {
    ClockOffset {
        lo_ms: sent - date_ms - 999,
        hi_ms: received - date_ms,
    }
}

/// An HTTP date (`Sat, 05 Dec 2026 03:52:38 GMT`) in epoch ms.
fn parse_http_date(text: &str) -> Option<i64> {
    chrono::DateTime::parse_from_rfc2822(text)
        .ok()
        .map(|d| d.timestamp_millis())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_narrow_the_offset_and_a_stepped_clock_starts_again() {
        let date = parse_http_date("Sat, 05 Dec 2026 03:52:38 GMT").unwrap();
        assert_eq!(date % 1000, 0);
        let clock = StoreClock::default();
        assert_eq!(clock.offset(), None);
        // This host 4.3 s ahead: sent at service time 38.95 s, answered by 38.99 s.
        let ahead = 4_300;
        clock.observe(offset(date + 950 + ahead, date + 990 + ahead, date));
        let first = clock.offset().unwrap();
        assert!(first.lo_ms <= ahead && ahead <= first.hi_ms, "{first:?}");
        // The next answer falls just into the next second: the interval narrows.
        clock.observe(offset(
            date + 1_005 + ahead,
            date + 1_020 + ahead,
            date + 1_000,
        ));
        let both = clock.offset().unwrap();
        assert!(both.lo_ms <= ahead && ahead <= both.hi_ms, "{both:?}");
        assert!(both.hi_ms - both.lo_ms < 100, "{both:?}");
        // The clock is stepped back by a minute: a fresh interval.
        clock.observe(offset(date - 60_000, date - 59_990, date));
        let stepped = clock.offset().unwrap();
        assert!(stepped.hi_ms < -50_000, "{stepped:?}");
        assert_eq!(parse_http_date("yesterday"), None);
    }
}
