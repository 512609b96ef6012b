//! Go's reference-time layouts (`2006-01-02T15:04:05Z07:00`), compiled once into a list of
//! tokens and used both ways: [`Layout::format`] and [`Layout::parse`], with the free
//! functions [`format_go`] and [`parse_go`] for one-off use (file paths, for example).
//!
//! The elements are those documented for Go's `time` package: `2006` `06` (year), `January`
//! `Jan` `1` `01` (month), `Monday` `Mon` (weekday), `2` `_2` `02` (day), `__2` `002` (day of
//! year), `15` `3` `03` (hour), `4` `04` (minute), `5` `05` (second), `PM` `pm`, fractional
//! seconds `.000`/`,000` (fixed width) and `.999`/`,999` (trailing zeros dropped), numeric
//! zones `-0700` `-07:00` `-07` `-070000` `-07:00:00`, their `Z` forms (which write `Z` for
//! UTC) and `MST` (the zone's abbreviation). Anything else is literal text; `Jan` and `Mon`
//! followed by a lower-case letter are literal too (`Janet`).
//!
//! Parsing follows Go's documented rules: runs of spaces in the layout match runs of spaces
//! in the input; a fractional second may follow the seconds even when the layout has none;
//! omitted elements are zero (or one for month and day, so a layout without a year gives
//! year 0); a numeric offset or `Z` in the input wins over the location; an abbreviation is
//! looked up in the location and, when unknown there, taken as offset 0 (`GMT+3` style
//! names excepted), as Go does; without zone information the wall time is read in the
//! location. Errors read like Go's (`parsing time "x" as "2006": cannot parse "x" as "2006"`).
//!
//! Substation also accepts the whole-layout names `unix` and `unix_milli` in file paths:
//! they format epoch seconds and milliseconds. sluice accepts them everywhere a layout is
//! taken, in both directions (Go would treat them as literal text).

use chrono::{DateTime, Datelike, NaiveDate, Offset, TimeZone, Timelike, Utc};
use chrono_tz::{OffsetName, Tz, TzOffset};

const LONG_DAYS: [&str; 7] = [
    "Sunday",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
];
const LONG_MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// How a numeric zone offset is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ZoneStyle {
    /// `-07`
    Hours,
    /// `-0700`
    HoursMinutes,
    /// `-07:00`
    Colon,
    /// `-070000`
    Seconds,
    /// `-07:00:00`
    ColonSeconds,
}

/// One layout element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    LongYear,
    Year,
    LongMonth,
    Month,
    NumMonth,
    ZeroMonth,
    LongWeekDay,
    WeekDay,
    Day,
    UnderDay,
    ZeroDay,
    UnderYearDay,
    ZeroYearDay,
    Hour,
    Hour12,
    ZeroHour12,
    Minute,
    ZeroMinute,
    Second,
    ZeroSecond,
    /// `PM` (upper) or `pm` (lower).
    Meridiem {
        upper: bool,
    },
    /// `MST`.
    ZoneName,
    /// A numeric offset; `z` writes `Z` for UTC and accepts it.
    Zone {
        style: ZoneStyle,
        z: bool,
    },
    /// Fractional seconds: `sep` then `digits` digits, trailing zeros dropped if `trim`.
    Frac {
        sep: u8,
        digits: u8,
        trim: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Lit(String),
    Field { field: Field, text: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Unix,
    UnixMilli,
    Tokens(Vec<Token>),
}

/// A compiled layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    text: String,
    kind: Kind,
}

/// Formats `t` with a Go layout (compiling it each time; keep a [`Layout`] for hot paths).
pub(crate) fn format_go(t: &DateTime<Tz>, layout: &str) -> String {
    Layout::compile(layout).format(t)
}

/// Parses `s` with a Go layout; wall times without zone information are read in `tz`.
#[cfg(test)]
pub(crate) fn parse_go(s: &str, layout: &str, tz: Tz) -> Result<DateTime<Utc>, String> {
    Layout::compile(layout).parse(s, tz)
}

/// The next element of a layout: (literal prefix length, field and its length), Go's rules.
fn next_field(l: &[u8]) -> Option<(usize, Field, usize)> {
    let starts = |i: usize, p: &str| l[i..].starts_with(p.as_bytes());
    let lower_at = |i: usize| l.get(i).is_some_and(|c| c.is_ascii_lowercase());
    let digit_at = |i: usize| l.get(i).is_some_and(|c| c.is_ascii_digit());
    for i in 0..l.len() {
        let found = match l[i] {
            b'J' if starts(i, "January") => Some((Field::LongMonth, 7)),
            b'J' if starts(i, "Jan") && !lower_at(i + 3) => Some((Field::Month, 3)),
            b'M' if starts(i, "Monday") => Some((Field::LongWeekDay, 6)),
            b'M' if starts(i, "Mon") && !lower_at(i + 3) => Some((Field::WeekDay, 3)),
            b'M' if starts(i, "MST") => Some((Field::ZoneName, 3)),
            b'0' if matches!(l.get(i + 1), Some(b'1'..=b'6')) => Some((
                match l[i + 1] {
                    b'1' => Field::ZeroMonth,
                    b'2' => Field::ZeroDay,
                    b'3' => Field::ZeroHour12,
                    b'4' => Field::ZeroMinute,
                    b'5' => Field::ZeroSecond,
                    _ => Field::Year,
                },
                2,
            )),
            b'0' if starts(i, "002") => Some((Field::ZeroYearDay, 3)),
            b'1' if starts(i, "15") => Some((Field::Hour, 2)),
            b'1' => Some((Field::NumMonth, 1)),
            b'2' if starts(i, "2006") => Some((Field::LongYear, 4)),
            b'2' => Some((Field::Day, 1)),
            // `_2006` is a literal `_` and a year.
            b'_' if starts(i, "_2006") => {
                return Some((i + 1, Field::LongYear, 4));
            }
            b'_' if starts(i, "_2") => Some((Field::UnderDay, 2)),
            b'_' if starts(i, "__2") => Some((Field::UnderYearDay, 3)),
            b'3' => Some((Field::Hour12, 1)),
            b'4' => Some((Field::Minute, 1)),
            b'5' => Some((Field::Second, 1)),
            b'P' if starts(i, "PM") => Some((Field::Meridiem { upper: true }, 2)),
            b'p' if starts(i, "pm") => Some((Field::Meridiem { upper: false }, 2)),
            c @ (b'-' | b'Z') => {
                let z = c == b'Z';
                [
                    ("070000", ZoneStyle::Seconds),
                    ("07:00:00", ZoneStyle::ColonSeconds),
                    ("0700", ZoneStyle::HoursMinutes),
                    ("07:00", ZoneStyle::Colon),
                    ("07", ZoneStyle::Hours),
                ]
                .into_iter()
                .find(|(p, _)| starts(i + 1, p))
                .map(|(p, style)| (Field::Zone { style, z }, 1 + p.len()))
            }
            sep @ (b'.' | b',') if matches!(l.get(i + 1), Some(b'0' | b'9')) => {
                let ch = l[i + 1];
                let mut j = i + 1;
                while l.get(j) == Some(&ch) {
                    j += 1;
                }
                if digit_at(j) {
                    None
                } else {
                    let digits = (j - i - 1).min(9) as u8;
                    Some((
                        Field::Frac {
                            sep,
                            digits,
                            trim: ch == b'9',
                        },
                        j - i,
                    ))
                }
            }
            _ => None,
        };
        if let Some((f, n)) = found {
            return Some((i, f, n));
        }
    }
    None
}

impl Layout {
    /// Compiles a layout: Go reference-time text, or `unix` / `unix_milli`.
    pub(crate) fn compile(layout: &str) -> Layout {
        let kind = match layout {
            "unix" => Kind::Unix,
            "unix_milli" => Kind::UnixMilli,
            _ => {
                let mut tokens = Vec::new();
                let mut rest = layout;
                while let Some((lit, field, n)) = next_field(rest.as_bytes()) {
                    if lit > 0 {
                        tokens.push(Token::Lit(rest[..lit].to_string()));
                    }
                    tokens.push(Token::Field {
                        field,
                        text: rest[lit..lit + n].to_string(),
                    });
                    rest = &rest[lit + n..];
                }
                if !rest.is_empty() {
                    tokens.push(Token::Lit(rest.to_string()));
                }
                Kind::Tokens(tokens)
            }
        };
        Layout {
            text: layout.to_string(),
            kind,
        }
    }

    /// Whether the layout has no element at all (it would format as itself).
    pub(crate) fn is_literal(&self) -> bool {
        match &self.kind {
            Kind::Tokens(t) => t.iter().all(|t| matches!(t, Token::Lit(_))),
            _ => false,
        }
    }

    /// Formats a time.
    pub(crate) fn format(&self, t: &DateTime<Tz>) -> String {
        let tokens = match &self.kind {
            Kind::Unix => return t.timestamp().to_string(),
            Kind::UnixMilli => return t.timestamp_millis().to_string(),
            Kind::Tokens(tokens) => tokens,
        };
        let mut out = String::with_capacity(self.text.len() + 10);
        for tok in tokens {
            match tok {
                Token::Lit(s) => out.push_str(s),
                Token::Field { field, .. } => format_field(&mut out, *field, t),
            }
        }
        out
    }

    /// Parses a time; wall times without zone information are read in `tz`.
    pub(crate) fn parse(&self, s: &str, tz: Tz) -> Result<DateTime<Utc>, String> {
        match &self.kind {
            Kind::Unix | Kind::UnixMilli => {
                let scale = if self.kind == Kind::Unix { 9 } else { 6 };
                let ns = scaled_decimal(s.trim(), scale).ok_or_else(|| {
                    format!("parsing time {s:?} as {:?}: not a number", self.text)
                })?;
                let secs = ns.div_euclid(1_000_000_000);
                let nanos = ns.rem_euclid(1_000_000_000) as u32;
                i64::try_from(secs)
                    .ok()
                    .and_then(|secs| DateTime::from_timestamp(secs, nanos))
                    .ok_or_else(|| format!("parsing time {s:?}: out of range"))
            }
            Kind::Tokens(tokens) => Parser::new(s, &self.text).run(tokens, tz),
        }
    }
}

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
fn abbreviation(off: &TzOffset) -> String {
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

fn format_field(out: &mut String, field: Field, t: &DateTime<Tz>) {
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

/// Parses a decimal number (`-12`, `1.5`, `2e3`, `1.25E-1`) scaled by `10^scale`, truncating
/// digits beyond that toward zero. `None` for anything that is not a decimal number or is
/// out of range.
pub(crate) fn scaled_decimal(text: &str, scale: u32) -> Option<i128> {
    let t = text.as_bytes();
    let (neg, t) = match t.first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let (mantissa, exp) = match t.iter().position(|c| *c == b'e' || *c == b'E') {
        Some(i) => {
            let e = std::str::from_utf8(&t[i + 1..]).ok()?.parse::<i32>().ok()?;
            (&t[..i], e)
        }
        None => (t, 0),
    };
    let (int, frac) = match mantissa.iter().position(|c| *c == b'.') {
        Some(i) => (&mantissa[..i], &mantissa[i + 1..]),
        None => (mantissa, &mantissa[..0]),
    };
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.iter().chain(frac).all(u8::is_ascii_digit) {
        return None;
    }
    // The digits as one integer, with the decimal point `shift` places from the right
    // after scaling.
    let shift = exp
        .checked_add(scale as i32)?
        .checked_sub(frac.len() as i32)?;
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
struct Parser<'a> {
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
    fn new(input: &'a str, layout: &'a str) -> Self {
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

    fn run(mut self, tokens: &[Token], tz: Tz) -> Result<DateTime<Utc>, String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn at(tz: Tz, rfc3339: &str) -> DateTime<Tz> {
        DateTime::parse_from_rfc3339(rfc3339)
            .unwrap()
            .with_timezone(&tz)
    }

    #[test]
    fn formats() {
        let ny = chrono_tz::America::New_York;
        let utc = chrono_tz::UTC;
        let t = "2020-06-05T14:39:59.430166Z";
        let cases: &[(&str, Tz, &str, &str)] = &[
            (t, utc, "2006-01-02T15:04:05Z07:00", "2020-06-05T14:39:59Z"),
            (
                t,
                ny,
                "2006-01-02T15:04:05Z07:00",
                "2020-06-05T10:39:59-04:00",
            ),
            (
                t,
                utc,
                "2006-01-02T15:04:05.000Z",
                "2020-06-05T14:39:59.430Z",
            ),
            (
                t,
                utc,
                "2006-01-02T15:04:05.999999999Z07:00",
                "2020-06-05T14:39:59.430166Z",
            ),
            (t, utc, "15:04:05.000000000", "14:39:59.430166000"),
            (t, utc, "15:04:05,000", "14:39:59,430"),
            ("2020-06-05T14:39:59Z", utc, "05.999", "59"),
            (t, utc, "Jan _2 15:04:05.000", "Jun  5 14:39:59.430"),
            (
                t,
                utc,
                "Mon, 02 Jan 2006 15:04:05 MST",
                "Fri, 05 Jun 2020 14:39:59 UTC",
            ),
            (
                t,
                ny,
                "Mon, 02 Jan 2006 15:04:05 MST",
                "Fri, 05 Jun 2020 10:39:59 EDT",
            ),
            (
                "2020-01-05T14:39:59Z",
                ny,
                "Monday January 2 MST -0700",
                "Sunday January 5 EST -0500",
            ),
            (t, ny, "3:04PM", "10:39AM"),
            (t, utc, "03:04pm", "02:39pm"),
            ("2020-06-05T00:10:00Z", utc, "3:04 PM", "12:10 AM"),
            (t, utc, "06 1 2 __2 002", "20 6 5 157 157"),
            ("2020-01-05T00:00:00Z", utc, "__2|002|_2", "  5|005| 5"),
            (
                t,
                chrono_tz::Asia::Kolkata,
                "-0700 -07:00 -07 Z0700 MST",
                "+0530 +05:30 +05 +0530 IST",
            ),
            (
                t,
                chrono_tz::Asia::Kathmandu,
                "-070000 -07:00:00 Z07",
                "+054500 +05:45:00 +05",
            ),
            (t, chrono_tz::Europe::Istanbul, "MST", "+03"),
            (t, utc, "Z07:00:00 Z070000", "Z Z"),
            (t, utc, "2006/01/02", "2020/06/05"),
            (t, utc, "unix", "1591367999"),
            (t, utc, "unix_milli", "1591367999430"),
            (t, utc, "Janet _2006", "Janet _2020"),
            (t, utc, "literal text", "literal text"),
        ];
        for (time, tz, layout, want) in cases {
            assert_eq!(format_go(&at(*tz, time), layout), *want, "{layout}");
        }
    }

    #[test]
    fn parses() {
        let utc = chrono_tz::UTC;
        let ny = chrono_tz::America::New_York;
        let cases: &[(&str, &str, Tz, &str)] = &[
            (
                "2006-01-02T15:04:05Z07:00",
                "2020-06-05T14:39:59Z",
                utc,
                "2020-06-05T14:39:59+00:00",
            ),
            (
                "2006-01-02T15:04:05Z07:00",
                "2020-06-05T10:39:59-04:00",
                utc,
                "2020-06-05T14:39:59+00:00",
            ),
            // A numeric offset wins over the location.
            (
                "2006-01-02T15:04:05Z07:00",
                "2020-06-05T14:39:59Z",
                ny,
                "2020-06-05T14:39:59+00:00",
            ),
            // No zone in the input: read in the location (summer and winter).
            (
                "2006-01-02 15:04:05",
                "2020-06-05 10:39:59",
                ny,
                "2020-06-05T14:39:59+00:00",
            ),
            (
                "2006-01-02 15:04:05",
                "2020-01-05 10:39:59",
                ny,
                "2020-01-05T15:39:59+00:00",
            ),
            // A fraction the layout does not mention.
            (
                "2006-01-02T15:04:05Z07:00",
                "2020-06-05T14:39:59.430166Z",
                utc,
                "2020-06-05T14:39:59.430166+00:00",
            ),
            (
                "2006-01-02T15:04:05.000Z",
                "2020-06-05T14:39:59.430Z",
                utc,
                "2020-06-05T14:39:59.430+00:00",
            ),
            (
                "2006-01-02T15:04:05.999999999Z",
                "2020-06-05T14:39:59Z",
                utc,
                "2020-06-05T14:39:59+00:00",
            ),
            (
                "2006-01-02T15:04:05.999999999Z",
                "2020-06-05T14:39:59.123456789Z",
                utc,
                "2020-06-05T14:39:59.123456789+00:00",
            ),
            (
                "15:04:05,000 2006-01-02",
                "14:39:59,430 2020-06-05",
                utc,
                "2020-06-05T14:39:59.430+00:00",
            ),
            (
                "Mon, 02 Jan 2006 15:04:05 MST",
                "Fri, 05 Jun 2020 14:39:59 UTC",
                ny,
                "2020-06-05T14:39:59+00:00",
            ),
            (
                "Mon, 02 Jan 2006 15:04:05 MST",
                "Fri, 05 Jun 2020 10:39:59 EDT",
                ny,
                "2020-06-05T14:39:59+00:00",
            ),
            // An abbreviation the location does not use counts as offset 0, as in Go.
            (
                "Mon, 02 Jan 2006 15:04:05 MST",
                "Fri, 05 Jun 2020 14:39:59 PDT",
                utc,
                "2020-06-05T14:39:59+00:00",
            ),
            (
                "Mon, 02 Jan 2006 15:04:05 MST",
                "Fri, 05 Jun 2020 17:39:59 GMT+3",
                utc,
                "2020-06-05T14:39:59+00:00",
            ),
            // Case-insensitive names, space runs, `_2` with and without the pad.
            (
                "Jan _2 15:04:05 2006",
                "JUN  5 14:39:59 2020",
                utc,
                "2020-06-05T14:39:59+00:00",
            ),
            (
                "Jan _2 15:04:05 2006",
                "Jun 15 14:39:59 2020",
                utc,
                "2020-06-15T14:39:59+00:00",
            ),
            (
                "January 2, 2006 3:04 PM",
                "june 5, 2020 2:39 PM",
                utc,
                "2020-06-05T14:39:00+00:00",
            ),
            (
                "3:04pm 2006-01-02",
                "12:05am 2020-06-05",
                utc,
                "2020-06-05T00:05:00+00:00",
            ),
            (
                "02/01/06 15h04",
                "05/06/20 14h39",
                utc,
                "2020-06-05T14:39:00+00:00",
            ),
            ("2006 __2", "2020 157", utc, "2020-06-05T00:00:00+00:00"),
            ("2006 002", "2021 060", utc, "2021-03-01T00:00:00+00:00"),
            (
                "2006-01-02 -0700",
                "2020-06-05 +0530",
                utc,
                "2020-06-04T18:30:00+00:00",
            ),
            (
                "2006-01-02 Z070000",
                "2020-06-05 -013000",
                utc,
                "2020-06-05T01:30:00+00:00",
            ),
            (
                "2006-01-02 -07",
                "2020-06-05 +02",
                utc,
                "2020-06-04T22:00:00+00:00",
            ),
            ("unix", "1591367999.5", utc, "2020-06-05T14:39:59.500+00:00"),
            (
                "unix_milli",
                "1591367999430",
                utc,
                "2020-06-05T14:39:59.430+00:00",
            ),
            // In the gap of a DST change Go moves back west of UTC and forward east of it.
            (
                "2006-01-02 15:04",
                "2020-03-08 02:30",
                ny,
                "2020-03-08T06:30:00+00:00",
            ),
            (
                "2006-01-02 15:04",
                "2021-03-28 02:00",
                chrono_tz::Europe::Paris,
                "2021-03-28T01:00:00+00:00",
            ),
            // The repeated hour of a DST change: the first one (still daylight time).
            (
                "2006-01-02 15:04",
                "2020-11-01 01:30",
                ny,
                "2020-11-01T05:30:00+00:00",
            ),
        ];
        for (layout, input, tz, want) in cases {
            let got = parse_go(input, layout, *tz).unwrap_or_else(|e| panic!("{input}: {e}"));
            assert_eq!(
                got,
                DateTime::parse_from_rfc3339(want).unwrap(),
                "{layout} {input}"
            );
        }
    }

    #[test]
    fn parse_errors() {
        let utc = chrono_tz::UTC;
        let cases = [
            ("2006-01-02", "2020-6-05", "cannot parse \"6-05\" as \"01\""),
            ("2006-01-02", "2020-13-05", "month out of range"),
            ("2006-01-02", "2021-02-29", "day out of range"),
            ("15:04", "25:00", "hour out of range"),
            ("2006-01-02", "2020-06-05 extra", "extra text: \" extra\""),
            (
                "2006-01-02T15:04:05.000",
                "2020-06-05T14:39:59.4",
                "cannot parse \".4\" as \".000\"",
            ),
            ("Jan 2006", "Foo 2020", "as \"Jan\""),
            ("2006 002", "2021 366", "day-of-year out of range"),
            (
                "2006-01 002",
                "2021-02 060",
                "day-of-year does not match month",
            ),
            ("-0700", "0530", "cannot parse"),
            ("MST", "xx", "cannot parse"),
            ("2006", "20é6", "cannot parse"),
            ("unix", "soon", "not a number"),
        ];
        for (layout, input, want) in cases {
            let err = parse_go(input, layout, utc).unwrap_err();
            assert!(err.contains(want), "{layout} {input}: {err}");
            assert!(err.starts_with("parsing time"), "{err}");
        }
    }

    #[test]
    fn round_trips() {
        let tz = chrono_tz::Europe::Paris;
        let t = at(tz, "2021-11-03T21:07:08.123456789+01:00");
        for layout in [
            "2006-01-02T15:04:05.999999999Z07:00",
            "Mon Jan _2 15:04:05.000000000 MST 2006",
            "02 Jan 06 15:04:05.999999999 -0700",
            "Monday, 02-Jan-06 03:04:05.000000000PM -07:00:00",
        ] {
            let s = format_go(&t, layout);
            assert_eq!(parse_go(&s, layout, tz).unwrap(), t, "{layout}: {s}");
        }
    }

    #[test]
    fn random_round_trips_and_no_panics() {
        let zones = [
            chrono_tz::UTC,
            chrono_tz::America::New_York,
            chrono_tz::Asia::Kathmandu,
            chrono_tz::Australia::Lord_Howe,
            chrono_tz::Pacific::Chatham,
        ];
        let exact = [
            "2006-01-02T15:04:05.999999999Z07:00",
            "Mon Jan _2 15:04:05.000000000 -07:00:00 2006",
            "2006 002 15 04 05,000000000 Z070000",
        ];
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..2000 {
            let ns = rng.i64(..);
            let tz = zones[rng.usize(..zones.len())];
            let t = DateTime::from_timestamp_nanos(ns).with_timezone(&tz);
            for layout in exact {
                let s = format_go(&t, layout);
                let parsed = parse_go(&s, layout, tz).unwrap();
                // Local mean time offsets have seconds, which `Z07:00` leaves out.
                if t.offset().fix().local_minus_utc() % 60 == 0 || !layout.contains("Z07:00") {
                    assert_eq!(parsed, t, "{layout}: {s}");
                }
                // Damaged input must give an error or a time, never a panic.
                let mut bytes = s.clone().into_bytes();
                let at = rng.usize(..bytes.len());
                bytes[at] = rng.u8(..);
                let damaged = String::from_utf8_lossy(&bytes);
                let _ = parse_go(&damaged, layout, tz);
                let _ = parse_go(&s[..rng.usize(..s.len())], layout, tz);
            }
        }
    }

    #[test]
    fn decimals() {
        let cases = [
            ("1", 9, Some(1_000_000_000)),
            ("-1.5", 9, Some(-1_500_000_000)),
            ("1591367999.430166", 9, Some(1_591_367_999_430_166_000)),
            ("1.5e3", 0, Some(1500)),
            ("1.23456789129", 9, Some(1_234_567_891)),
            ("1E-3", 6, Some(1000)),
            ("0.0000000001", 9, Some(0)),
            ("", 9, None),
            (".", 9, None),
            ("1e", 9, None),
            ("abc", 9, None),
            ("1e400", 0, None),
        ];
        for (text, scale, want) in cases {
            assert_eq!(scaled_decimal(text, scale), want, "{text}");
        }
    }
}
