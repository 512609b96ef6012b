//! Parsing a time with a compiled Go layout, as Go's `time.Parse` does.

use chrono::{DateTime, Datelike, NaiveDate, Offset, TimeZone, Utc};
use chrono_tz::{Tz, TzOffset};

use super::format::abbreviation;
use super::{Field, LONG_DAYS, LONG_MONTHS, Token, ZoneStyle};

/// Parses a decimal number (`-12`, `1.5`, `2e3`, `1.25E-1`) scaled by `10^scale`, truncating
/// digits beyond that toward zero. `None` for anything that is not a decimal number or is
/// out of range.
pub(crate) fn scaled_decimal(text: &str, scale: u32) -> Option<i128> {
    let (neg, int, frac, exp) = decimal_parts(text.as_bytes())?;
    // The digits as one integer, with the decimal point `shift` places from the right
    // after scaling.
    let shift = exp
        .checked_add(scale as i32)?
        .checked_sub(frac.len() as i32)?;
    match scaled_decimal_fast(int, frac, shift, neg) {
        Some(result) => result,
        None => scaled_digits(int, frac, shift, neg),
    }
}

/// A decimal number's parts, found in one pass: its sign (`-` or `+` first), integer and
/// fraction digits (either may be empty, not both) and its exponent (after `e` or `E`, as
/// `i32` parses it); `None` for anything else. Every float epoch comes through here, as
/// the text of its shortest form: one pass over it, not a search for the exponent, another
/// for the point and a third checking the digits.
pub(super) fn decimal_parts(t: &[u8]) -> Option<(bool, &[u8], &[u8], i32)> {
    let (neg, t) = match t.first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let digits_from = |mut i: usize| {
        while t.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let int_end = digits_from(0);
    let (frac, end) = match t.get(int_end) {
        Some(b'.') => {
            let end = digits_from(int_end + 1);
            (&t[int_end + 1..end], end)
        }
        _ => (&t[int_end..int_end], int_end),
    };
    let exp = match t.get(end) {
        None => 0,
        Some(b'e' | b'E') => std::str::from_utf8(&t[end + 1..])
            .ok()?
            .parse::<i32>()
            .ok()?,
        Some(_) => return None,
    };
    if int_end == 0 && frac.is_empty() {
        return None;
    }
    Some((neg, &t[..int_end], frac, exp))
}

/// [`scaled_digits`] of the common case, `None` when it is not: most epochs have at most
/// 18 digits (`1591367999.430166`), which fit a u64 as they are, and dropping the digits
/// past the scale is a division.
pub(super) fn scaled_decimal_fast(
    int: &[u8],
    frac: &[u8],
    shift: i32,
    neg: bool,
) -> Option<Option<i128>> {
    if int.len() + frac.len() > 18 || shift.unsigned_abs() > 38 {
        return None;
    }
    let digits = |v: u64, part: &[u8]| part.iter().fold(v, |v, c| v * 10 + (c - b'0') as u64);
    let v = digits(digits(0, int), frac);
    let v = if shift < 0 {
        // At most 18 digits: a division by 10^19 or more leaves nothing, and a smaller one
        // stays within `u64` (no 128-bit division).
        Some(10u64.checked_pow(shift.unsigned_abs()).map_or(0, |p| v / p) as i128)
    } else {
        // In 64 bits when the product fits (an epoch in seconds scaled to nanoseconds
        // does): a 128-bit multiplication with overflow check is a call of its own.
        match 10u64
            .checked_pow(shift.unsigned_abs())
            .and_then(|p| v.checked_mul(p))
        {
            Some(product) => Some(i128::from(product)),
            None => (v as i128).checked_mul(10i128.pow(shift.unsigned_abs())),
        }
    };
    Some(v.map(|v| if neg { -v } else { v }))
}

/// [`scaled_decimal`] of any number of digits: `int` and `frac` (ASCII digits), the decimal
/// point `shift` places from the right after scaling.
pub(super) fn scaled_digits(int: &[u8], frac: &[u8], shift: i32, neg: bool) -> Option<i128> {
    let digits = || int.iter().chain(frac).copied().skip_while(|c| *c == b'0');
    let count = digits().count();
    // Digits dropped by a negative shift are truncated.
    let keep = if shift < 0 {
        count.saturating_sub(shift.unsigned_abs() as usize)
    } else {
        count
    };
    let mut v: i128 = 0;
    for c in digits().take(keep) {
        v = v.checked_mul(10)?.checked_add((c - b'0') as i128)?;
    }
    if shift > 0 && v != 0 {
        v = v.checked_mul(10i128.checked_pow(shift as u32)?)?;
    }
    Some(if neg { -v } else { v })
}

/// State of one parse, Go's rules.
pub(super) struct Parser<'a> {
    input: &'a str,
    layout: &'a str,
    value: &'a [u8],
    year: i32,
    month: i32,
    day: i32,
    yday: i32,
    hour: i32,
    minute: i32,
    second: i32,
    nanos: i64,
    pm: Option<bool>,
    utc: bool,
    offset: Option<i32>,
    zone_name: Option<String>,
}

enum Fail {
    /// The input does not match the element.
    Bad,
    /// A value is out of range (the name of what).
    Range(&'static str),
}

fn getnum(v: &[u8], fixed: bool) -> Result<(i32, &[u8]), Fail> {
    match (v.first(), v.get(1)) {
        (Some(a @ b'0'..=b'9'), Some(b @ b'0'..=b'9')) => {
            Ok((((a - b'0') * 10 + (b - b'0')) as i32, &v[2..]))
        }
        (Some(a @ b'0'..=b'9'), _) if !fixed => Ok(((a - b'0') as i32, &v[1..])),
        _ => Err(Fail::Bad),
    }
}

fn getnum3(v: &[u8], fixed: bool) -> Result<(i32, &[u8]), Fail> {
    let n = v.iter().take(3).take_while(|c| c.is_ascii_digit()).count();
    if n == 0 || (fixed && n != 3) {
        return Err(Fail::Bad);
    }
    let num = v[..n]
        .iter()
        .fold(0i32, |acc, c| acc * 10 + (c - b'0') as i32);
    Ok((num, &v[n..]))
}

/// Case-insensitive match of one of `names` (or their first three letters).
fn lookup<'v>(v: &'v [u8], names: &[&str], short: bool) -> Result<(usize, &'v [u8]), Fail> {
    for (i, name) in names.iter().enumerate() {
        let name = if short { &name[..3] } else { name };
        if v.len() >= name.len() && v[..name.len()].eq_ignore_ascii_case(name.as_bytes()) {
            return Ok((i, &v[name.len()..]));
        }
    }
    Err(Fail::Bad)
}

/// Parses `.123` (separator included, `n` bytes in all) into nanoseconds.
fn nanoseconds(v: &[u8], n: usize) -> Result<i64, Fail> {
    if !matches!(v.first(), Some(b'.' | b',')) {
        return Err(Fail::Bad);
    }
    let digits = &v[1..n];
    if !digits.iter().all(u8::is_ascii_digit) {
        return Err(Fail::Bad);
    }
    let mut ns: i64 = 0;
    for i in 0..9 {
        ns = ns * 10 + digits.get(i).map_or(0, |c| (c - b'0') as i64);
    }
    Ok(ns)
}

/// Length of a zone abbreviation at the start of `v` (Go's heuristics), if it looks like one.
fn zone_name_len(v: &[u8]) -> Option<usize> {
    if v.len() < 3 {
        return None;
    }
    if v.starts_with(b"ChST") || v.starts_with(b"MeST") {
        return Some(4);
    }
    if v.starts_with(b"GMT") {
        return Some(3 + signed_offset_len(&v[3..]));
    }
    if matches!(v[0], b'+' | b'-') {
        return Some(signed_offset_len(v)).filter(|n| *n > 0);
    }
    let upper = v
        .iter()
        .take(6)
        .take_while(|c| c.is_ascii_uppercase())
        .count();
    match upper {
        3 => Some(3),
        4 if v[3] == b'T' || v.starts_with(b"WITA") => Some(4),
        5 if v[4] == b'T' => Some(5),
        _ => None,
    }
}

/// Length of `+h`/`-hh` (hours at most 12) at the start of `v`, or 0.
fn signed_offset_len(v: &[u8]) -> usize {
    if !matches!(v.first(), Some(b'+' | b'-')) {
        return 0;
    }
    let n = v[1..].iter().take_while(|c| c.is_ascii_digit()).count();
    if n == 0 || n > 2 {
        return 0;
    }
    let h: u32 = std::str::from_utf8(&v[1..1 + n])
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(99);
    if h > 12 { 0 } else { 1 + n }
}

/// The offset (seconds east of UTC) in effect in `tz` at a Unix second.
fn offset_at(tz: Tz, unix: i64) -> Option<TzOffset> {
    let utc = DateTime::from_timestamp(unix, 0)?.naive_utc();
    Some(tz.offset_from_utc_datetime(&utc))
}

/// Reads a wall time (as seconds, as if it were UTC) in `tz`, Go's way: the offset in effect
/// at the wall time, corrected once if the resulting instant lies in another period.
fn wall_to_unix(tz: Tz, wall: i64) -> i64 {
    let Some(first) = offset_at(tz, wall) else {
        return wall;
    };
    let guess = wall - first.fix().local_minus_utc() as i64;
    let off = offset_at(tz, guess).map_or(0, |o| o.fix().local_minus_utc());
    wall - off as i64
}

/// The offset of an abbreviation in `tz` around a wall time: one in effect there if any,
/// else one used within a year and a half of it.
fn offset_of_name(tz: Tz, name: &str, wall: i64) -> Option<i32> {
    const MONTH: i64 = 30 * 86_400;
    let mut seen = Vec::new();
    for k in 0..=18i64 {
        for sign in [1, -1] {
            if let Some(off) = offset_at(tz, wall + sign * k * MONTH)
                && abbreviation(&off) == name
            {
                seen.push(off.fix().local_minus_utc());
            }
        }
    }
    // In effect at the given time?
    for &off in &seen {
        if let Some(at) = offset_at(tz, wall - off as i64)
            && abbreviation(&at) == name
            && at.fix().local_minus_utc() == off
        {
            return Some(off);
        }
    }
    seen.first().copied()
}

impl<'a> Parser<'a> {
    pub(super) fn new(input: &'a str, layout: &'a str) -> Self {
        Parser {
            input,
            layout,
            value: input.as_bytes(),
            year: 0,
            month: -1,
            day: -1,
            yday: -1,
            hour: 0,
            minute: 0,
            second: 0,
            nanos: 0,
            pm: None,
            utc: false,
            offset: None,
            zone_name: None,
        }
    }

    fn cannot(&self, elem: &str) -> String {
        format!(
            "parsing time {:?} as {:?}: cannot parse {:?} as {:?}",
            self.input,
            self.layout,
            String::from_utf8_lossy(self.value),
            elem
        )
    }

    fn range(&self, what: &str) -> String {
        format!("parsing time {:?}: {what} out of range", self.input)
    }

    /// Matches literal text; runs of spaces match runs of spaces.
    fn literal(&mut self, lit: &str) -> bool {
        let mut p = lit.as_bytes();
        let mut v = self.value;
        while let Some(&c) = p.first() {
            if c == b' ' {
                if v.first().is_some_and(|c| *c != b' ') {
                    return false;
                }
                p = trim_spaces(p);
                v = trim_spaces(v);
                continue;
            }
            if v.first() != Some(&c) {
                return false;
            }
            p = &p[1..];
            v = &v[1..];
        }
        self.value = v;
        true
    }

    pub(super) fn run(mut self, tokens: &[Token], tz: Tz) -> Result<DateTime<Utc>, String> {
        for (i, tok) in tokens.iter().enumerate() {
            match tok {
                Token::Lit(lit) => {
                    if !self.literal(lit) {
                        return Err(self.cannot(lit));
                    }
                }
                Token::Field { field, text } => {
                    let frac_next = tokens[i + 1..].iter().find_map(|t| match t {
                        Token::Field { field, .. } => Some(matches!(field, Field::Frac { .. })),
                        Token::Lit(_) => None,
                    }) == Some(true);
                    match self.field(*field, frac_next) {
                        Ok(()) => {}
                        Err(Fail::Bad) => return Err(self.cannot(text)),
                        Err(Fail::Range(what)) => return Err(self.range(what)),
                    }
                }
            }
        }
        if !self.value.is_empty() {
            return Err(format!(
                "parsing time {:?}: extra text: {:?}",
                self.input,
                String::from_utf8_lossy(self.value)
            ));
        }
        self.finish(tz)
    }

    fn field(&mut self, field: Field, frac_next: bool) -> Result<(), Fail> {
        let v = self.value;
        let rest = match field {
            Field::LongYear => {
                if v.len() < 4 || !v[..4].iter().all(u8::is_ascii_digit) {
                    return Err(Fail::Bad);
                }
                self.year = std::str::from_utf8(&v[..4])
                    .unwrap_or("0")
                    .parse()
                    .unwrap_or(0);
                &v[4..]
            }
            Field::Year => {
                let (y, rest) = getnum(v, true)?;
                self.year = y + if y >= 69 { 1900 } else { 2000 };
                rest
            }
            Field::LongMonth | Field::Month => {
                let (m, rest) = lookup(v, &LONG_MONTHS, field == Field::Month)?;
                self.month = m as i32 + 1;
                rest
            }
            Field::NumMonth | Field::ZeroMonth => {
                let (m, rest) = getnum(v, field == Field::ZeroMonth)?;
                if !(1..=12).contains(&m) {
                    return Err(Fail::Range("month"));
                }
                self.month = m;
                rest
            }
            Field::LongWeekDay | Field::WeekDay => {
                // Checked, then ignored, as in Go.
                lookup(v, &LONG_DAYS, field == Field::WeekDay)?.1
            }
            Field::Day | Field::UnderDay | Field::ZeroDay => {
                let v = if field == Field::UnderDay && v.first() == Some(&b' ') {
                    &v[1..]
                } else {
                    v
                };
                let (d, rest) = getnum(v, field == Field::ZeroDay)?;
                self.day = d;
                rest
            }
            Field::UnderYearDay | Field::ZeroYearDay => {
                let mut v = v;
                if field == Field::UnderYearDay {
                    for _ in 0..2 {
                        if v.first() == Some(&b' ') {
                            v = &v[1..];
                        }
                    }
                }
                let (d, rest) = getnum3(v, field == Field::ZeroYearDay)?;
                self.yday = d;
                rest
            }
            Field::Hour => {
                let (h, rest) = getnum(v, false)?;
                if !(0..24).contains(&h) {
                    return Err(Fail::Range("hour"));
                }
                self.hour = h;
                rest
            }
            Field::Hour12 | Field::ZeroHour12 => {
                let (h, rest) = getnum(v, field == Field::ZeroHour12)?;
                if !(0..=12).contains(&h) {
                    return Err(Fail::Range("hour"));
                }
                self.hour = h;
                rest
            }
            Field::Minute | Field::ZeroMinute => {
                let (m, rest) = getnum(v, field == Field::ZeroMinute)?;
                if !(0..60).contains(&m) {
                    return Err(Fail::Range("minute"));
                }
                self.minute = m;
                rest
            }
            Field::Second | Field::ZeroSecond => {
                let (s, mut rest) = getnum(v, field == Field::ZeroSecond)?;
                if !(0..60).contains(&s) {
                    return Err(Fail::Range("second"));
                }
                self.second = s;
                // A fraction the layout does not mention is accepted after the seconds.
                if !frac_next
                    && rest.len() >= 2
                    && matches!(rest[0], b'.' | b',')
                    && rest[1].is_ascii_digit()
                {
                    let n = 1 + rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
                    self.nanos = nanoseconds(rest, n)?;
                    rest = &rest[n..];
                }
                rest
            }
            Field::Meridiem { upper } => {
                if v.len() < 2 {
                    return Err(Fail::Bad);
                }
                let (am, pm): (&[u8], &[u8]) = if upper {
                    (b"AM", b"PM")
                } else {
                    (b"am", b"pm")
                };
                if &v[..2] == pm {
                    self.pm = Some(true);
                } else if &v[..2] == am {
                    self.pm = Some(false);
                } else {
                    return Err(Fail::Bad);
                }
                &v[2..]
            }
            Field::Zone { style, z } => {
                if z && v.first() == Some(&b'Z') {
                    self.utc = true;
                    &v[1..]
                } else {
                    self.numeric_zone(style)?
                }
            }
            Field::ZoneName => {
                if v.starts_with(b"UTC") {
                    self.utc = true;
                    &v[3..]
                } else {
                    let n = zone_name_len(v).ok_or(Fail::Bad)?;
                    self.zone_name = Some(String::from_utf8_lossy(&v[..n]).into_owned());
                    &v[n..]
                }
            }
            Field::Frac { digits, trim, .. } => {
                if trim {
                    if v.len() < 2 || !matches!(v[0], b'.' | b',') || !v[1].is_ascii_digit() {
                        // The fraction is optional.
                        v
                    } else {
                        let n = 1 + v[1..].iter().take_while(|c| c.is_ascii_digit()).count();
                        self.nanos = nanoseconds(v, n)?;
                        &v[n..]
                    }
                } else {
                    let n = 1 + digits as usize;
                    if v.len() < n {
                        return Err(Fail::Bad);
                    }
                    self.nanos = nanoseconds(v, n)?;
                    &v[n..]
                }
            }
        };
        self.value = rest;
        Ok(())
    }

    fn numeric_zone(&mut self, style: ZoneStyle) -> Result<&'a [u8], Fail> {
        let v = self.value;
        let need = match style {
            ZoneStyle::Hours => 3,
            ZoneStyle::HoursMinutes => 5,
            ZoneStyle::Colon => 6,
            ZoneStyle::Seconds => 7,
            ZoneStyle::ColonSeconds => 9,
        };
        if v.len() < need {
            return Err(Fail::Bad);
        }
        let (h, m, s): (&[u8], &[u8], &[u8]) = match style {
            ZoneStyle::Hours => (&v[1..3], b"00", b"00"),
            ZoneStyle::HoursMinutes => (&v[1..3], &v[3..5], b"00"),
            ZoneStyle::Colon => {
                if v[3] != b':' {
                    return Err(Fail::Bad);
                }
                (&v[1..3], &v[4..6], b"00")
            }
            ZoneStyle::Seconds => (&v[1..3], &v[3..5], &v[5..7]),
            ZoneStyle::ColonSeconds => {
                if v[3] != b':' || v[6] != b':' {
                    return Err(Fail::Bad);
                }
                (&v[1..3], &v[4..6], &v[7..9])
            }
        };
        let (h, _) = getnum(h, true)?;
        let (m, _) = getnum(m, true)?;
        let (s, _) = getnum(s, true)?;
        if h > 24 {
            return Err(Fail::Range("time zone offset hour"));
        }
        if m > 60 {
            return Err(Fail::Range("time zone offset minute"));
        }
        if s > 60 {
            return Err(Fail::Range("time zone offset second"));
        }
        let secs = (h * 60 + m) * 60 + s;
        self.offset = Some(match v[0] {
            b'+' => secs,
            b'-' => -secs,
            _ => return Err(Fail::Bad),
        });
        Ok(&v[need..])
    }

    fn finish(mut self, tz: Tz) -> Result<DateTime<Utc>, String> {
        match self.pm {
            Some(true) if self.hour < 12 => self.hour += 12,
            Some(false) if self.hour == 12 => self.hour = 0,
            _ => {}
        }
        if self.yday >= 0 {
            let date = NaiveDate::from_yo_opt(self.year, self.yday as u32)
                .ok_or_else(|| self.range("day-of-year"))?;
            if self.month >= 0 && self.month != date.month() as i32 {
                return Err(format!(
                    "parsing time {:?}: day-of-year does not match month",
                    self.input
                ));
            }
            if self.day >= 0 && self.day != date.day() as i32 {
                return Err(format!(
                    "parsing time {:?}: day-of-year does not match day",
                    self.input
                ));
            }
            self.month = date.month() as i32;
            self.day = date.day() as i32;
        } else {
            if self.month < 0 {
                self.month = 1;
            }
            if self.day < 0 {
                self.day = 1;
            }
        }
        let date = NaiveDate::from_ymd_opt(self.year, self.month as u32, self.day as u32)
            .ok_or_else(|| self.range("day"))?;
        let wall = date
            .and_hms_opt(self.hour as u32, self.minute as u32, self.second as u32)
            .ok_or_else(|| self.range("time"))?
            .and_utc()
            .timestamp();
        let unix = if self.utc {
            wall
        } else if let Some(off) = self.offset {
            wall - off as i64
        } else if let Some(name) = &self.zone_name {
            let off = offset_of_name(tz, name, wall).unwrap_or_else(|| {
                // Unknown in the location: Go takes `GMT+h` at its word and anything
                // else as offset 0.
                name.strip_prefix("GMT")
                    .and_then(|h| h.parse::<i32>().ok())
                    .map_or(0, |h| h * 3600)
            });
            wall - off as i64
        } else {
            wall_to_unix(tz, wall)
        };
        DateTime::from_timestamp(unix, self.nanos as u32)
            .ok_or_else(|| format!("parsing time {:?}: out of range", self.input))
    }
}

fn trim_spaces(v: &[u8]) -> &[u8] {
    let n = v.iter().take_while(|c| **c == b' ').count();
    &v[n..]
}
