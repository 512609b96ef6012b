//! The `time_*` family: epoch nanoseconds (Substation's internal representation of time)
//! to and from strings, epoch seconds and milliseconds, and the current time.
//!
//! What the transforms share lives here: the `location` and `format` settings, reading a
//! value as a number of epoch units, and turning a result into epoch nanoseconds.

pub(crate) mod from_string;
pub(crate) mod from_unix;
pub(crate) mod from_unix_milli;
pub(crate) mod layout;
pub(crate) mod now;
pub(crate) mod to_string;
pub(crate) mod to_unix;
pub(crate) mod to_unix_milli;

use compact_str::ToCompactString;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use sluice_engine::{Build, ConfigError, Message, Registry, TransformError, Value};

use crate::common::Io;
use layout::Layout;

/// Registers the family.
pub(crate) fn register(r: &mut Registry) {
    r.map(&from_string::INFO, from_string::TimeFromString::build);
    r.computing(&from_unix::INFO, from_unix::TimeFromUnix::build, |t| {
        t.io.keys()
    });
    r.computing(
        &from_unix_milli::INFO,
        from_unix_milli::TimeFromUnixMilli::build,
        |t| t.io.keys(),
    );
    r.map(&now::INFO, now::TimeNow::build);
    r.computing(&to_string::INFO, to_string::TimeToString::build, |t| {
        t.io.keys()
    });
    r.computing(&to_unix::INFO, to_unix::TimeToUnix::build, |t| t.io.keys());
    r.computing(
        &to_unix_milli::INFO,
        to_unix_milli::TimeToUnixMilli::build,
        |t| t.io.keys(),
    );
}

/// Resolves the `location` setting as Go's `LoadLocation` does: an IANA name, `UTC` or
/// empty for UTC, `Local` for the machine's zone (`TZ`, else `/etc/localtime`, else UTC).
pub(crate) fn location(b: &Build<'_>, name: &str) -> Result<Tz, ConfigError> {
    match name {
        "" | "UTC" => Ok(Tz::UTC),
        "Local" => Ok(local_zone()),
        _ => Tz::from_str(name).map_err(|_| {
            b.field_error(
                "location",
                format!(
                    "unknown time zone {name:?}: use an IANA name such as \"America/New_York\", or \"UTC\""
                ),
            )
        }),
    }
}

fn local_zone() -> Tz {
    if let Ok(tz) = std::env::var("TZ")
        && let Ok(z) = Tz::from_str(tz.trim_start_matches(':'))
    {
        return z;
    }
    std::fs::read_link("/etc/localtime")
        .ok()
        .and_then(|p| {
            let p = p.to_string_lossy().into_owned();
            let (_, name) = p.split_once("zoneinfo/")?;
            Tz::from_str(name).ok()
        })
        .unwrap_or(Tz::UTC)
}

/// Compiles the required `format` setting (a Go layout, or `unix` / `unix_milli`).
pub(crate) fn format(b: &Build<'_>, format: &Option<String>) -> Result<Layout, ConfigError> {
    match format.as_deref() {
        None | Some("") => Err(b.field_error(
            "format",
            "missing required option: format (a Go layout such as \"2006-01-02T15:04:05Z07:00\")",
        )),
        Some(f) => {
            let layout = Layout::compile(f);
            if layout.is_literal() {
                b.warn(format!(
                    "settings.format {f:?} has no Go layout element (2006, 01, 02, 15, 04, 05, ...), so every time formats as that text and only that text parses"
                ));
            }
            Ok(layout)
        }
    }
}

/// A value holding a number of epoch units (a JSON number or a numeric string), as
/// nanoseconds: `scale` is the power of ten of nanoseconds per unit (9 for seconds, 6 for
/// milliseconds, 0 for nanoseconds). Fractions are kept down to the nanosecond.
pub(crate) fn epoch_nanos(v: &Value, scale: u32, unit: &str) -> Result<i64, TransformError> {
    // An integer needs no decimal text: scale it directly (fractions take the exact
    // decimal path below).
    if let Some(i) = v.as_i64() {
        return 10i64
            .checked_pow(scale)
            .and_then(|m| i.checked_mul(m))
            .ok_or_else(|| {
                TransformError::failed(format!(
                    "epoch {unit} {i} is out of range (epoch nanoseconds cover the years 1678 to 2262)"
                ))
            });
    }
    // A number's shortest text (what Go's `String()` of a float gives), written on the
    // stack by the formatter `serde_json`'s `Display` of a float calls, without going
    // through `fmt`: one per message.
    let mut float_text = zmij::Buffer::new();
    let number_text;
    let text: &str = match v {
        Value::Number(n) if let Some(f) = n.as_f64().filter(|_| n.is_f64()) => {
            float_text.format_finite(f)
        }
        Value::Number(n) => {
            number_text = n.to_compact_string();
            &number_text
        }
        Value::String(s) => s.trim(),
        other => {
            return Err(TransformError::failed(format!(
                "expected epoch {unit} as a number, found {}",
                describe(other)
            )));
        }
    };
    let ns = layout::scaled_decimal(text, scale).ok_or_else(|| {
        TransformError::failed(format!(
            "expected epoch {unit} as a number, found {}",
            describe(v)
        ))
    })?;
    i64::try_from(ns).map_err(|_| {
        TransformError::failed(format!(
            "epoch {unit} {text} is out of range (epoch nanoseconds cover the years 1678 to 2262)"
        ))
    })
}

/// A time as epoch nanoseconds, or an error when it does not fit (a layout without a year
/// parses as year 0, which Go would silently wrap around).
pub(crate) fn to_nanos(t: &DateTime<Utc>) -> Result<i64, TransformError> {
    t.timestamp_nanos_opt().ok_or_else(|| {
        TransformError::failed(format!(
            "time {} is outside the range of epoch nanoseconds (the years 1678 to 2262); does the format lack a year?",
            t.format("%Y-%m-%dT%H:%M:%S%.fZ")
        ))
    })
}

/// The time at a number of epoch nanoseconds.
pub(crate) fn from_nanos(ns: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_nanos(ns)
}

/// Replaces the input value of a single-value transform with `f` of it; a missing source
/// passes the message through unchanged.
pub(crate) fn apply(
    io: &Io,
    msg: &mut Message,
    f: impl FnOnce(&Value) -> Result<Value, TransformError>,
) -> Result<(), TransformError> {
    let result = match io.read(msg) {
        Some(v) => Some(f(&v)?),
        None => None,
    };
    if let Some(v) = result {
        io.write(msg, v)?;
    }
    Ok(())
}

/// What [`apply`] writes at the target from the value read at the source (`read`: it, or
/// nothing when it is missing): `f` of it.
pub(crate) fn compute_one(
    read: &[&Value],
    f: impl FnOnce(&Value) -> Result<Value, TransformError>,
) -> Result<Option<Value>, TransformError> {
    match read {
        [v] => f(v).map(Some),
        _ => Ok(None),
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
        Value::String(s) => {
            let short: String = s.chars().take(64).collect();
            format!("the string {short:?}")
        }
        Value::Number(n) => format!("the number {n}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A float epoch is read from the text serde_json's `Display` gives it (Go's `String()`
    /// of the float), written without `fmt`: the same nanoseconds, or the same error, for
    /// floats of every size and sign, at every scale.
    #[test]
    fn float_epochs_read_as_their_display_text() {
        let mut rng = fastrand::Rng::with_seed(28);
        let mut floats = vec![
            1591367999.430166,
            -1.5,
            0.1,
            1e-7,
            1e21,
            1.7976931348623157e308,
            5e-324,
            -0.0,
        ];
        floats.extend((0..5_000).map(|_| f64::from_bits(rng.u64(..))));
        floats.extend((0..5_000).map(|_| rng.f64() * 4e9 - 2e9));
        for f in floats.into_iter().filter(|f| f.is_finite()) {
            let v = sluice_engine::value::number(f);
            let Value::Number(n) = &v else { continue };
            for scale in [0, 6, 9] {
                let via_display = layout::scaled_decimal(&n.to_string(), scale)
                    .and_then(|ns| i64::try_from(ns).ok());
                let got = epoch_nanos(&v, scale, "seconds").ok();
                assert_eq!(got, via_display, "{f} at scale {scale}");
            }
        }
    }
}
