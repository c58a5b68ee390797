//! One logging set-up for every binary, so operators get the same formats
//! and the same `RUST_LOG` / `--log.level` / `--log.format` behaviour
//! everywhere, as Prometheus exporters have them: logfmt (the default) or
//! JSON lines on stderr, colour only when stderr is a terminal.

use std::fmt;
use std::io::IsTerminal as _;
use std::str::FromStr;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::{FormatTime, SystemTime};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// The logging flags both binaries take, declared once and flattened into
/// each command line so names, environment variables and help agree.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LogArgs {
    /// Log level when RUST_LOG is unset: error, warn, info, debug or trace.
    /// Default info.
    #[arg(
        long = "log.level",
        env = "SKELETONHUNTER_LOG_LEVEL",
        value_name = "LEVEL"
    )]
    pub log_level: Option<LogLevel>,
    /// Deprecated: --log.level.
    #[arg(long = "log-level", hide = true, conflicts_with = "log_level")]
    pub log_level_deprecated: Option<String>,
    /// Log line format: logfmt or json (colour only when stderr is a
    /// terminal).
    #[arg(
        long = "log.format",
        env = "SKELETONHUNTER_LOG_FORMAT",
        value_name = "FORMAT",
        default_value = "logfmt"
    )]
    pub log_format: LogFormat,
}

impl LogArgs {
    /// The log level directive: `--log.level`, the deprecated
    /// `--log-level`, else info.
    pub fn directive(&self) -> String {
        match (&self.log_level, &self.log_level_deprecated) {
            (Some(l), _) => l.as_str().to_string(),
            (None, Some(old)) => old.clone(),
            (None, None) => "info".to_string(),
        }
    }

    /// The deprecated logging flag given, as (old, new) names.
    pub fn deprecated_flag(&self) -> Option<(&'static str, &'static str)> {
        self.log_level_deprecated
            .is_some()
            .then_some(("--log-level", "--log.level"))
    }
}

/// `--log.format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// `ts=… level=info msg="…" key=value`, one event a line.
    #[default]
    Logfmt,
    /// One JSON object a line.
    Json,
}

/// A `--log.format` or `--log.level` value we do not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogFlagError {
    /// Not a format.
    #[error("unknown log format {0:?}: expected logfmt or json")]
    Format(String),
    /// Not a level.
    #[error("unknown log level {0:?}: expected error, warn, info, debug or trace")]
    Level(String),
}

impl FromStr for LogFormat {
    type Err = LogFlagError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "logfmt" => Ok(LogFormat::Logfmt),
            "json" => Ok(LogFormat::Json),
            other => Err(LogFlagError::Format(other.to_string())),
        }
    }
}

/// `--log.level`: one of the levels Prometheus' exporters take (plus
/// `trace`). Finer filters go through `RUST_LOG`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLevel(String);

impl Default for LogLevel {
    fn default() -> Self {
        LogLevel("info".into())
    }
}

impl FromStr for LogLevel {
    type Err = LogFlagError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let l = s.trim().to_ascii_lowercase();
        match l.as_str() {
            "error" | "warn" | "info" | "debug" | "trace" => Ok(LogLevel(l)),
            _ => Err(LogFlagError::Level(s.to_string())),
        }
    }
}

impl LogLevel {
    /// The level's name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Initialise stderr logging at `default_level` (an `EnvFilter`
/// directive; `RUST_LOG` wins when set) in `format`.
pub fn init(default_level: &str, format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default_level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    // A second init (tests) is harmless: ignore the error.
    let _ = match format {
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_target(false)
            .try_init(),
        LogFormat::Logfmt => builder
            .event_format(Logfmt {
                color: std::io::stderr().is_terminal(),
            })
            .try_init(),
    };
}

/// The logfmt line format (go-kit/slog style keys `ts`, `level`, `msg`).
struct Logfmt {
    /// Colour the level (stderr is a terminal).
    color: bool,
}

impl<S, N> FormatEvent<S, N> for Logfmt
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        _ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        w.write_str("ts=")?;
        SystemTime.format_time(&mut w)?;
        let level = event.metadata().level().as_str().to_ascii_lowercase();
        if self.color {
            let code = match *event.metadata().level() {
                tracing::Level::ERROR => 31,
                tracing::Level::WARN => 33,
                _ => 32,
            };
            write!(w, " level=\x1b[{code}m{level}\x1b[0m")?;
        } else {
            write!(w, " level={level}")?;
        }
        let mut fields = String::new();
        event.record(&mut Fields(&mut fields));
        writeln!(w, "{fields}")
    }
}

/// Writes an event's fields as ` key=value` pairs, `message` as `msg`.
struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        push_pair(self.0, field.name(), value);
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        push_pair(self.0, field.name(), &format!("{value:?}"));
    }
}

/// Append ` key=value`, quoting the value when logfmt needs it.
fn push_pair(out: &mut String, key: &str, value: &str) {
    let key = if key == "message" { "msg" } else { key };
    out.push(' ');
    out.push_str(key);
    out.push('=');
    let plain = !value.is_empty()
        && !value
            .chars()
            .any(|c| c == ' ' || c == '=' || c == '"' || c.is_control());
    if plain {
        out.push_str(value);
        return;
    }
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => out.push_str(&c.escape_unicode().to_string()),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_and_refuse_unknown_values() {
        assert_eq!("json".parse::<LogFormat>().unwrap(), LogFormat::Json);
        assert_eq!("logfmt".parse::<LogFormat>().unwrap(), LogFormat::Logfmt);
        let e = "text".parse::<LogFormat>().unwrap_err().to_string();
        assert!(
            e.contains("\"text\"") && e.contains("logfmt or json"),
            "{e}"
        );
        assert_eq!("WARN".parse::<LogLevel>().unwrap().as_str(), "warn");
        assert!("verbose".parse::<LogLevel>().is_err());
    }

    #[test]
    fn logfmt_quotes_what_needs_quoting() {
        let mut s = String::new();
        push_pair(&mut s, "message", "cannot bind 0.0.0.0:9465: \"busy\"");
        push_pair(&mut s, "peer", "198.18.0.2");
        push_pair(&mut s, "empty", "");
        push_pair(&mut s, "nl", "a\nb");
        assert_eq!(
            s,
            r#" msg="cannot bind 0.0.0.0:9465: \"busy\"" peer=198.18.0.2 empty="" nl="a\nb""#
        );
    }
}
