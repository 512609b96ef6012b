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

mod format;
mod parse;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use compact_str::{CompactString, ToCompactString};

use format::format_field;
use parse::Parser;
pub(crate) use parse::scaled_decimal;

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
    /// The layout as a template, when all its fields have a fixed width (see [`Fixed`]).
    fixed: Option<Fixed>,
}

/// Formats `t` with a Go layout (compiling it each time; keep a [`Layout`] for hot paths).
pub(crate) fn format_go(t: &DateTime<Tz>, layout: &str) -> String {
    Layout::compile(layout).format(t).into_string()
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

/// A layout whose fields all have a fixed width (`2006-01-02T15:04:05Z`, with `.000`
/// fractions or a two-digit year too), kept as its text with each field's place: a time is
/// formatted by writing each field's digits into a copy of the text, the date and time
/// worked out once, rather than field by field through the token list (a thousand
/// instructions a time on the Zeek benchmark, half of `time_to_string`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fixed {
    /// The layout's text, each field's place holding its text (overwritten).
    template: Vec<u8>,
    /// Each field and where it goes in `template`.
    fields: Vec<(usize, FixedField)>,
}

/// A field of a [`Fixed`] layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FixedField {
    /// `2006`, for years 0 to 9999 (others are written by the token list).
    LongYear,
    /// `06`.
    Year,
    /// `01`, `02`, `002`, `15`, `04`, `05`.
    Month,
    Day,
    YearDay,
    Hour,
    Minute,
    Second,
    /// `.000` or `,000` with this many digits.
    Frac(usize),
}

impl Fixed {
    /// The most bytes a fixed layout's text may have (formatted on the stack).
    const MAX: usize = 64;

    /// The fixed form of a layout whose fields all have a fixed width.
    fn of(kind: &Kind) -> Option<Fixed> {
        let Kind::Tokens(tokens) = kind else {
            return None;
        };
        let mut template = Vec::new();
        let mut fields = Vec::new();
        for tok in tokens {
            match tok {
                Token::Lit(s) => template.extend_from_slice(s.as_bytes()),
                Token::Field { field, text } => {
                    let f = match *field {
                        Field::LongYear => FixedField::LongYear,
                        Field::Year => FixedField::Year,
                        Field::ZeroMonth => FixedField::Month,
                        Field::ZeroDay => FixedField::Day,
                        Field::ZeroYearDay => FixedField::YearDay,
                        Field::Hour => FixedField::Hour,
                        Field::ZeroMinute => FixedField::Minute,
                        Field::ZeroSecond => FixedField::Second,
                        // `.000000000000` shows nine digits for a field twelve long (Go
                        // caps them too): the token list writes that.
                        Field::Frac {
                            digits,
                            trim: false,
                            ..
                        } if text.len() == 1 + usize::from(digits) => {
                            FixedField::Frac(usize::from(digits))
                        }
                        _ => return None,
                    };
                    fields.push((template.len(), f));
                    template.extend_from_slice(text.as_bytes());
                }
            }
        }
        (template.len() <= Fixed::MAX && !fields.is_empty()).then_some(Fixed { template, fields })
    }

    /// `local` written in this layout; `None` for a year `2006` cannot hold in four digits.
    fn format(&self, local: &chrono::NaiveDateTime) -> Option<CompactString> {
        use chrono::{Datelike, Timelike};
        let year = local.year();
        let mut buf = [0u8; Fixed::MAX];
        let out = &mut buf[..self.template.len()];
        out.copy_from_slice(&self.template);
        let put = |out: &mut [u8], at: usize, n: u32, width: usize| {
            let mut n = n;
            for b in out[at..at + width].iter_mut().rev() {
                *b = b'0' + (n % 10) as u8;
                n /= 10;
            }
        };
        for &(at, f) in &self.fields {
            match f {
                FixedField::LongYear => {
                    let y = u32::try_from(year).ok().filter(|y| *y <= 9999)?;
                    put(out, at, y, 4);
                }
                FixedField::Year => put(out, at, year.rem_euclid(100) as u32, 2),
                FixedField::Month => put(out, at, local.month(), 2),
                FixedField::Day => put(out, at, local.day(), 2),
                FixedField::YearDay => put(out, at, local.ordinal(), 3),
                FixedField::Hour => put(out, at, local.hour(), 2),
                FixedField::Minute => put(out, at, local.minute(), 2),
                FixedField::Second => put(out, at, local.second(), 2),
                FixedField::Frac(digits) => {
                    // Leap seconds (chrono's nanosecond >= 1e9) are folded into the second.
                    let nanos = local.nanosecond() % 1_000_000_000;
                    put(out, at + 1, nanos / 10u32.pow(9 - digits as u32), digits);
                }
            }
        }
        // Digits replaced ASCII digits, so the text is as valid as the layout's.
        std::str::from_utf8(out).ok().map(CompactString::from)
    }
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
            fixed: Fixed::of(&kind),
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
    pub(crate) fn format(&self, t: &DateTime<Tz>) -> CompactString {
        if let Some(fixed) = &self.fixed
            && let Some(text) = fixed.format(&t.naive_local())
        {
            return text;
        }
        self.format_by_tokens(t)
    }

    /// [`Layout::format`] token by token, whatever the layout.
    fn format_by_tokens(&self, t: &DateTime<Tz>) -> CompactString {
        let tokens = match &self.kind {
            Kind::Unix => return t.timestamp().to_compact_string(),
            Kind::UnixMilli => return t.timestamp_millis().to_compact_string(),
            Kind::Tokens(tokens) => tokens,
        };
        // Written into this thread's scratch text (pushing piece by piece into the result
        // would check its inline or heap form at every push), then copied once: inline, with
        // no allocation, when it fits 24 bytes, as a date and time to the second does.
        thread_local! {
            static SCRATCH: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
        }
        SCRATCH.with_borrow_mut(|out| {
            out.clear();
            let local = t.naive_local();
            for tok in tokens {
                match tok {
                    Token::Lit(s) => out.push_str(s),
                    Token::Field { field, .. } => format_field(out, *field, t, &local),
                }
            }
            CompactString::from(out.as_str())
        })
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

#[cfg(test)]
mod tests;
