//! Formatting a time with a compiled Go layout.

use chrono::{DateTime, Datelike, NaiveDateTime, Offset, Timelike};
use chrono_tz::{OffsetName, Tz, TzOffset};

use super::{Field, LONG_DAYS, LONG_MONTHS, ZoneStyle};

/// The decimal digits of `n`, at least `width` of them (zeros in front), at the end of a
/// stack buffer: the buffer and where they start. A timestamp has six or seven such fields,
/// formatted once per message, so none of them allocates.
fn digits(n: u64, width: usize) -> ([u8; 20], usize) {
    let mut buf = [b'0'; 20];
    let mut at = buf.len();
    let mut rest = n;
    loop {
        at -= 1;
        buf[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    // The buffer starts as zeros: the padding is the zeros in front of the digits.
    (buf, at.min(buf.len().saturating_sub(width)))
}

/// Appends ASCII bytes (digits) to `out`.
fn push_ascii(out: &mut String, bytes: &[u8]) {
    out.extend(bytes.iter().map(|&b| char::from(b)));
}

/// Writes `n` with at least `width` digits (zeros in front).
fn pad(out: &mut String, n: i64, width: usize) {
    if n < 0 {
        out.push('-');
    }
    let n = n.unsigned_abs();
    // Most fields are below 100 and at most two wide (month, day, hour, minute, second):
    // their one or two digits are pushed as they are, not laid out in a buffer first
    // (that took a hundred instructions a field).
    if n < 100 && width <= 2 {
        let (tens, ones) = ((n / 10) as u8, (n % 10) as u8);
        if tens > 0 || width == 2 {
            out.push(char::from(b'0' + tens));
        }
        out.push(char::from(b'0' + ones));
        return;
    }
    let (buf, from) = digits(n, width);
    push_ascii(out, &buf[from..]);
}

/// The abbreviation of an offset; unnamed ones are written as tzdata does (`+03`, `+0530`).
pub(super) fn abbreviation(off: &TzOffset) -> String {
    if let Some(name) = off.abbreviation() {
        return name.to_string();
    }
    let secs = off.fix().local_minus_utc();
    let mins = secs.abs() / 60;
    let sign = if secs < 0 { '-' } else { '+' };
    if mins % 60 == 0 {
        format!("{sign}{:02}", mins / 60)
    } else {
        format!("{sign}{:02}{:02}", mins / 60, mins % 60)
    }
}

/// Writes one field of `t`, whose wall time in its zone is `local` (computed once per time:
/// each of `DateTime`'s own getters would compute it again).
pub(super) fn format_field(
    out: &mut String,
    field: Field,
    t: &DateTime<Tz>,
    local: &NaiveDateTime,
) {
    match field {
        Field::LongYear => pad(out, local.year() as i64, 4),
        Field::Year => pad(out, local.year().rem_euclid(100) as i64, 2),
        Field::LongMonth => out.push_str(LONG_MONTHS[local.month0() as usize]),
        Field::Month => out.push_str(&LONG_MONTHS[local.month0() as usize][..3]),
        Field::NumMonth => pad(out, local.month() as i64, 0),
        Field::ZeroMonth => pad(out, local.month() as i64, 2),
        Field::LongWeekDay => {
            out.push_str(LONG_DAYS[local.weekday().num_days_from_sunday() as usize])
        }
        Field::WeekDay => {
            out.push_str(&LONG_DAYS[local.weekday().num_days_from_sunday() as usize][..3])
        }
        Field::Day => pad(out, local.day() as i64, 0),
        Field::UnderDay => {
            if local.day() < 10 {
                out.push(' ');
            }
            pad(out, local.day() as i64, 0)
        }
        Field::ZeroDay => pad(out, local.day() as i64, 2),
        Field::UnderYearDay => {
            let d = local.ordinal();
            if d < 100 {
                out.push(' ');
            }
            if d < 10 {
                out.push(' ');
            }
            pad(out, d as i64, 0)
        }
        Field::ZeroYearDay => pad(out, local.ordinal() as i64, 3),
        Field::Hour => pad(out, local.hour() as i64, 2),
        Field::Hour12 | Field::ZeroHour12 => {
            let h = match local.hour() % 12 {
                0 => 12,
                h => h,
            };
            pad(out, h as i64, if field == Field::Hour12 { 0 } else { 2 })
        }
        Field::Minute => pad(out, local.minute() as i64, 0),
        Field::ZeroMinute => pad(out, local.minute() as i64, 2),
        Field::Second => pad(out, local.second() as i64, 0),
        Field::ZeroSecond => pad(out, local.second() as i64, 2),
        Field::Meridiem { upper } => out.push_str(match (local.hour() >= 12, upper) {
            (true, true) => "PM",
            (true, false) => "pm",
            (false, true) => "AM",
            (false, false) => "am",
        }),
        Field::ZoneName => out.push_str(&abbreviation(t.offset())),
        Field::Zone { style, z } => {
            let secs = t.offset().fix().local_minus_utc();
            if z && secs == 0 {
                out.push('Z');
            } else {
                format_offset(out, secs, style);
            }
        }
        Field::Frac {
            sep,
            digits: shown,
            trim,
        } => {
            // Leap seconds (chrono's nanosecond >= 1e9) are folded into the second.
            let nanos = local.nanosecond() % 1_000_000_000;
            let (buf, _) = digits(nanos as u64, 9);
            let mut frac = &buf[buf.len() - 9..][..shown as usize];
            if trim {
                while let [rest @ .., b'0'] = frac {
                    frac = rest;
                }
                if frac.is_empty() {
                    return;
                }
            }
            out.push(sep as char);
            push_ascii(out, frac);
        }
    }
}

fn format_offset(out: &mut String, secs: i32, style: ZoneStyle) {
    out.push(if secs < 0 { '-' } else { '+' });
    let abs = secs.unsigned_abs();
    let colon = matches!(style, ZoneStyle::Colon | ZoneStyle::ColonSeconds);
    pad(out, (abs / 3600) as i64, 2);
    if style != ZoneStyle::Hours {
        if colon {
            out.push(':');
        }
        pad(out, (abs / 60 % 60) as i64, 2);
    }
    if matches!(style, ZoneStyle::Seconds | ZoneStyle::ColonSeconds) {
        if colon {
            out.push(':');
        }
        pad(out, (abs % 60) as i64, 2);
    }
}

#[cfg(test)]
mod tests {
    use super::pad;

    /// Every number from -1000 to 1000 at widths 0 to 4, the two-digit fields pushed
    /// directly among them: a sign, then the digits with zeros in front to the width.
    #[test]
    fn pad_writes_the_digits_to_the_width() {
        for n in -1000i64..=1000 {
            for width in 0..=4 {
                let mut out = String::from("x");
                pad(&mut out, n, width);
                let sign = if n < 0 { "-" } else { "" };
                let want = format!("x{sign}{:0width$}", n.unsigned_abs());
                assert_eq!(out, want, "{n} at width {width}");
            }
        }
    }
}
