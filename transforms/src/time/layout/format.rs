//! Formatting a time with a compiled Go layout.

use chrono::{DateTime, Datelike, Offset, Timelike};
use chrono_tz::{OffsetName, Tz, TzOffset};

use super::{Field, LONG_DAYS, LONG_MONTHS, ZoneStyle};

fn pad(out: &mut String, n: i64, width: usize) {
    if n < 0 {
        out.push('-');
    }
    let digits = n.unsigned_abs().to_string();
    for _ in digits.len()..width {
        out.push('0');
    }
    out.push_str(&digits);
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

pub(super) fn format_field(out: &mut String, field: Field, t: &DateTime<Tz>) {
    match field {
        Field::LongYear => pad(out, t.year() as i64, 4),
        Field::Year => pad(out, t.year().rem_euclid(100) as i64, 2),
        Field::LongMonth => out.push_str(LONG_MONTHS[t.month0() as usize]),
        Field::Month => out.push_str(&LONG_MONTHS[t.month0() as usize][..3]),
        Field::NumMonth => pad(out, t.month() as i64, 0),
        Field::ZeroMonth => pad(out, t.month() as i64, 2),
        Field::LongWeekDay => out.push_str(LONG_DAYS[t.weekday().num_days_from_sunday() as usize]),
        Field::WeekDay => {
            out.push_str(&LONG_DAYS[t.weekday().num_days_from_sunday() as usize][..3])
        }
        Field::Day => pad(out, t.day() as i64, 0),
        Field::UnderDay => {
            if t.day() < 10 {
                out.push(' ');
            }
            pad(out, t.day() as i64, 0)
        }
        Field::ZeroDay => pad(out, t.day() as i64, 2),
        Field::UnderYearDay => {
            let d = t.ordinal();
            if d < 100 {
                out.push(' ');
            }
            if d < 10 {
                out.push(' ');
            }
            pad(out, d as i64, 0)
        }
        Field::ZeroYearDay => pad(out, t.ordinal() as i64, 3),
        Field::Hour => pad(out, t.hour() as i64, 2),
        Field::Hour12 | Field::ZeroHour12 => {
            let h = match t.hour() % 12 {
                0 => 12,
                h => h,
            };
            pad(out, h as i64, if field == Field::Hour12 { 0 } else { 2 })
        }
        Field::Minute => pad(out, t.minute() as i64, 0),
        Field::ZeroMinute => pad(out, t.minute() as i64, 2),
        Field::Second => pad(out, t.second() as i64, 0),
        Field::ZeroSecond => pad(out, t.second() as i64, 2),
        Field::Meridiem { upper } => out.push_str(match (t.hour() >= 12, upper) {
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
        Field::Frac { sep, digits, trim } => {
            // Leap seconds (chrono's nanosecond >= 1e9) are folded into the second.
            let nanos = t.nanosecond() % 1_000_000_000;
            let all = format!("{nanos:09}");
            let mut frac = &all[..digits as usize];
            if trim {
                frac = frac.trim_end_matches('0');
                if frac.is_empty() {
                    return;
                }
            }
            out.push(sep as char);
            out.push_str(frac);
        }
    }
}

fn format_offset(out: &mut String, secs: i32, style: ZoneStyle) {
    out.push(if secs < 0 { '-' } else { '+' });
    let abs = secs.unsigned_abs();
    let colon = matches!(style, ZoneStyle::Colon | ZoneStyle::ColonSeconds);
    out.push_str(&format!("{:02}", abs / 3600));
    if style != ZoneStyle::Hours {
        if colon {
            out.push(':');
        }
        out.push_str(&format!("{:02}", abs / 60 % 60));
    }
    if matches!(style, ZoneStyle::Seconds | ZoneStyle::ColonSeconds) {
        if colon {
            out.push(':');
        }
        out.push_str(&format!("{:02}", abs % 60));
    }
}
