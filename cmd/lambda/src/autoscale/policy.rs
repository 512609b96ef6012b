//! The autoscaler's decisions, apart from the calls that carry them out: its settings
//! (environment defaults, per-stream tags), the cooldowns, the new shard count, the alarm
//! notification it reads and the alarm metrics it writes. Pure functions, table-tested in
//! `tests.rs`.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::Value;

/// The default threshold (`AUTOSCALE_KINESIS_THRESHOLD`).
pub const THRESHOLD_ENV: &str = "AUTOSCALE_KINESIS_THRESHOLD";
/// The default upscale datapoints.
pub const UPSCALE_DATAPOINTS_ENV: &str = "AUTOSCALE_KINESIS_UPSCALE_DATAPOINTS";
/// The default downscale datapoints.
pub const DOWNSCALE_DATAPOINTS_ENV: &str = "AUTOSCALE_KINESIS_DOWNSCALE_DATAPOINTS";

/// A stream's threshold.
pub const THRESHOLD_TAG: &str = "AutoscaleThreshold";
/// A stream's upscale datapoints.
pub const UPSCALE_DATAPOINTS_TAG: &str = "AutoscaleUpscaleDatapoints";
/// A stream's downscale datapoints.
pub const DOWNSCALE_DATAPOINTS_TAG: &str = "AutoscaleDownscaleDatapoints";
/// The fewest shards a downscale leaves.
pub const MINIMUM_SHARDS_TAG: &str = "MinimumShards";
/// The most shards an upscale makes.
pub const MAXIMUM_SHARDS_TAG: &str = "MaximumShards";
/// When the stream was last scaled (RFC 3339).
pub const LAST_SCALING_EVENT_TAG: &str = "LastScalingEvent";

/// The thresholds allowed.
pub(crate) const THRESHOLD_MIN: f64 = 0.4;
pub(crate) const THRESHOLD_MAX: f64 = 0.9;
/// The datapoints allowed: CloudWatch evaluates at most a day of 60-second periods.
pub(crate) const DATAPOINTS_MAX: u32 = 1440;
/// How far below the upscale threshold the downscale alarm's is.
pub(crate) const DOWNSCALE_GAP: f64 = 0.35;
/// The least time between a scaling and an upscale.
pub(crate) const UPSCALE_COOLDOWN: Duration = Duration::from_secs(3 * 60);
/// The least time between a scaling and a downscale.
pub(crate) const DOWNSCALE_COOLDOWN: Duration = Duration::from_secs(30 * 60);
/// UpdateShardCount's most shards in a stream.
pub(crate) const UPDATE_MAX_SHARDS: u32 = 10_000;

/// Which way an alarm asks to scale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// `<stream>_upscale`: more shards.
    Up,
    /// `<stream>_downscale`: fewer shards.
    Down,
}

impl Direction {
    /// The direction named by an alarm's suffix, if it has one.
    pub fn of_alarm(name: &str) -> Option<Direction> {
        if name.ends_with("_upscale") {
            Some(Direction::Up)
        } else if name.ends_with("_downscale") {
            Some(Direction::Down)
        } else {
            None
        }
    }

    pub(crate) fn word(self) -> &'static str {
        match self {
            Direction::Up => "upscale",
            Direction::Down => "downscale",
        }
    }

    pub(crate) fn cooldown(self) -> Duration {
        match self {
            Direction::Up => UPSCALE_COOLDOWN,
            Direction::Down => DOWNSCALE_COOLDOWN,
        }
    }
}

/// How a stream's alarms are written: from the environment, or a stream's tags.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    /// The upscale threshold; the downscale one is 0.35 below it.
    pub threshold: f64,
    /// The minutes above the threshold before an upscale.
    pub upscale_datapoints: u32,
    /// The minutes below the downscale threshold before a downscale.
    pub downscale_datapoints: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            threshold: 0.70,
            upscale_datapoints: 5,
            downscale_datapoints: 60,
        }
    }
}

impl Settings {
    /// The downscale alarm's threshold (rounded to 6 places, so that 0.5 gives 0.15).
    pub fn downscale_threshold(&self) -> f64 {
        ((self.threshold - DOWNSCALE_GAP) * 1e6).round() / 1e6
    }
}

/// A setting (an environment variable or a stream tag) with a value that is not allowed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{name} is {value:?}: expected {allowed}")]
pub struct BadSetting {
    /// The variable or tag.
    pub name: String,
    /// Its value.
    pub value: String,
    /// What is allowed.
    pub allowed: String,
}

pub(crate) fn bad(name: &str, value: &str, allowed: impl Into<String>) -> BadSetting {
    BadSetting {
        name: name.to_string(),
        value: value.to_string(),
        allowed: allowed.into(),
    }
}

pub(crate) fn parse_threshold(name: &str, value: &str) -> Result<f64, BadSetting> {
    match value.trim().parse::<f64>() {
        Ok(t) if (THRESHOLD_MIN..=THRESHOLD_MAX).contains(&t) => Ok(t),
        _ => Err(bad(
            name,
            value,
            format!("a number from {THRESHOLD_MIN} to {THRESHOLD_MAX}"),
        )),
    }
}

pub(crate) fn parse_datapoints(name: &str, value: &str) -> Result<u32, BadSetting> {
    match value.trim().parse::<u32>() {
        Ok(n) if (1..=DATAPOINTS_MAX).contains(&n) => Ok(n),
        _ => Err(bad(
            name,
            value,
            format!("a whole number from 1 to {DATAPOINTS_MAX}"),
        )),
    }
}

/// A shard bound; 0 (as in Substation) is none.
pub(crate) fn parse_shards(name: &str, value: &str) -> Result<Option<u32>, BadSetting> {
    value
        .trim()
        .parse::<u32>()
        .map(|n| (n > 0).then_some(n))
        .map_err(|_| bad(name, value, "a whole number of shards (0 for none)"))
}

/// The defaults from the environment (`lookup` reads a variable).
pub fn settings_from(lookup: impl Fn(&str) -> Option<String>) -> Result<Settings, BadSetting> {
    let mut s = Settings::default();
    if let Some(v) = lookup(THRESHOLD_ENV) {
        s.threshold = parse_threshold(THRESHOLD_ENV, &v)?;
    }
    if let Some(v) = lookup(UPSCALE_DATAPOINTS_ENV) {
        s.upscale_datapoints = parse_datapoints(UPSCALE_DATAPOINTS_ENV, &v)?;
    }
    if let Some(v) = lookup(DOWNSCALE_DATAPOINTS_ENV) {
        s.downscale_datapoints = parse_datapoints(DOWNSCALE_DATAPOINTS_ENV, &v)?;
    }
    Ok(s)
}

/// What a stream's tags say.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamTags {
    /// The defaults with the stream's overrides.
    pub settings: Settings,
    /// `MinimumShards`.
    pub minimum: Option<u32>,
    /// `MaximumShards`.
    pub maximum: Option<u32>,
    /// `LastScalingEvent`.
    pub last_scaling_event: Option<DateTime<Utc>>,
}

impl StreamTags {
    /// Reads `tags` (key, value) over `defaults`; other tags are ignored.
    pub fn parse(defaults: Settings, tags: &[(String, String)]) -> Result<StreamTags, BadSetting> {
        let mut t = StreamTags {
            settings: defaults,
            minimum: None,
            maximum: None,
            last_scaling_event: None,
        };
        for (k, v) in tags {
            match k.as_str() {
                THRESHOLD_TAG => t.settings.threshold = parse_threshold(k, v)?,
                UPSCALE_DATAPOINTS_TAG => t.settings.upscale_datapoints = parse_datapoints(k, v)?,
                DOWNSCALE_DATAPOINTS_TAG => {
                    t.settings.downscale_datapoints = parse_datapoints(k, v)?
                }
                MINIMUM_SHARDS_TAG => t.minimum = parse_shards(k, v)?,
                MAXIMUM_SHARDS_TAG => t.maximum = parse_shards(k, v)?,
                LAST_SCALING_EVENT_TAG => {
                    let at = DateTime::parse_from_rfc3339(v.trim())
                        .map_err(|_| bad(k, v, "an RFC 3339 time"))?;
                    t.last_scaling_event = Some(at.with_timezone(&Utc));
                }
                _ => {}
            }
        }
        if let (Some(min), Some(max)) = (t.minimum, t.maximum)
            && min > max
        {
            return Err(bad(
                MINIMUM_SHARDS_TAG,
                &min.to_string(),
                format!("at most {MAXIMUM_SHARDS_TAG} ({max})"),
            ));
        }
        Ok(t)
    }
}

/// How long a scaling in `direction` must still wait after the last one, at `now`; `None`
/// when it need not.
pub fn cooldown_left(
    direction: Direction,
    last: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Option<Duration> {
    let last = last?;
    let since = (now - last).to_std().unwrap_or(Duration::ZERO);
    direction
        .cooldown()
        .checked_sub(since)
        .filter(|d| !d.is_zero())
}

/// The count Substation's factors give for `current` open shards.
pub fn factor_count(current: u32, direction: Direction) -> u32 {
    let factor = match current {
        0..=4 => 2.0,
        5..=12 => 1.75,
        13..=32 => 1.5,
        _ => 1.25,
    };
    let n = f64::from(current);
    match direction {
        Direction::Up => (n * factor).floor() as u32,
        Direction::Down => (n / factor).ceil() as u32,
    }
}

/// A new shard count, and what limited it (if anything did).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The count.
    pub to: u32,
    /// The limit that set it, in words.
    pub limited_by: Option<String>,
}

/// The count to scale `current` open shards (at least 1) to, in `direction`, within
/// `minimum` and `maximum` and what one UpdateShardCount accepts.
pub fn target_count(
    current: u32,
    direction: Direction,
    minimum: Option<u32>,
    maximum: Option<u32>,
) -> Target {
    let mut to = factor_count(current, direction);
    let mut limited_by = None;
    if let Some(min) = minimum
        && to < min
    {
        to = min;
        limited_by = Some(format!("{MINIMUM_SHARDS_TAG} is {min}"));
    }
    if let Some(max) = maximum
        && to > max
    {
        to = max;
        limited_by = Some(format!("{MAXIMUM_SHARDS_TAG} is {max}"));
    }
    if to < 1 {
        to = 1;
        limited_by = Some("a stream has at least 1 shard".into());
    }
    let most = current.saturating_mul(2).min(UPDATE_MAX_SHARDS);
    let least = current.div_ceil(2);
    if to > most {
        to = most;
        limited_by = Some(format!(
            "UpdateShardCount allows at most {most} from {current}"
        ));
    }
    if to < least {
        to = least;
        limited_by = Some(format!(
            "UpdateShardCount allows at least {least} from {current}"
        ));
    }
    let reversed = match direction {
        Direction::Up => to < current,
        Direction::Down => to > current,
    };
    if reversed {
        limited_by = limited_by
            .map(|why| format!("{why}, and a {} never goes the other way", direction.word()));
        to = current;
    }
    Target { to, limited_by }
}

/// What an alarm's state-change notification (an SNS `Message`) says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    /// `AlarmName`.
    pub alarm: String,
    /// `NewStateValue`.
    pub state: String,
    /// The `StreamName` dimension of its metrics, if one has it.
    pub stream: Option<String>,
}

/// Reads an alarm notification; the error says why it is not one.
pub fn parse_notification(message: &str) -> Result<Notification, String> {
    let v: Value = serde_json::from_str(message)
        .map_err(|e| format!("the SNS message is not an alarm notification (JSON): {e}"))?;
    let alarm = v["AlarmName"]
        .as_str()
        .ok_or("the SNS message is not an alarm notification: no AlarmName")?
        .to_string();
    let state = v["NewStateValue"].as_str().unwrap_or_default().to_string();
    let trigger = &v["Trigger"];
    let metric_dimensions = trigger["Metrics"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| &m["MetricStat"]["Metric"]["Dimensions"]);
    let stream = metric_dimensions
        .chain(std::iter::once(&trigger["Dimensions"]))
        .filter_map(Value::as_array)
        .flatten()
        .find_map(|d| {
            let name = d.get("name").or_else(|| d.get("Name"))?.as_str()?;
            let value = d.get("value").or_else(|| d.get("Value"))?.as_str()?;
            (name == "StreamName" && !value.is_empty()).then(|| value.to_string())
        });
    Ok(Notification {
        alarm,
        state,
        stream,
    })
}

/// The direction and stream a notification asks to scale, or why it asks nothing.
pub fn trigger(n: &Notification) -> Result<(Direction, &str), String> {
    if n.state != "ALARM" {
        return Err(format!("the alarm's new state is {:?}, not ALARM", n.state));
    }
    let direction = Direction::of_alarm(&n.alarm)
        .ok_or("the alarm's name ends in neither _upscale nor _downscale")?;
    let stream = n
        .stream
        .as_deref()
        .ok_or("the alarm's metrics have no StreamName dimension")?;
    Ok((direction, stream))
}

/// The shard count an alarm's metric math was written for: the `N` of an expression that
/// divides by `1000*N*` (records) or `1048576*N*` (bytes), as the handler's `metric_queries`,
/// the SAM template and Substation write them; `None` when no expression has that shape (an
/// alarm an operator wrote otherwise).
pub fn alarm_shards<'a>(expressions: impl IntoIterator<Item = &'a str>) -> Option<u32> {
    expressions.into_iter().find_map(|e| {
        let e: String = e.chars().filter(|c| !c.is_whitespace()).collect();
        ["(1000*", "(1048576*"].iter().find_map(|per_shard| {
            let rest = &e[e.find(per_shard)? + per_shard.len()..];
            let digits = &rest[..rest.find('*')?];
            digits.parse().ok()
        })
    })
}
