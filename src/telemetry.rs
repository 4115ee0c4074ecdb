//! Logging setup: `tracing` with an `RUST_LOG`-style filter, as text for humans or JSON for
//! log pipelines. Logs go to stderr so that subcommands printing YAML (`crd`) keep stdout clean.

use tracing::level_filters::LevelFilter;
use tracing::Subscriber;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::EnvFilter;

/// How log lines are formatted (`--log-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line, fields flattened to the top level.
    Json,
}

#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("RUST_LOG is not a valid filter ({0}); use e.g. `info` or `kafka_observer_operator=debug,kube=info`")]
    InvalidFilter(String),
    #[error("a global logger is already installed: call telemetry::init once, at startup")]
    AlreadyInitialised,
}

/// The filter: `RUST_LOG` if set, else `info`.
pub fn filter_from_env() -> Result<EnvFilter, TelemetryError> {
    EnvFilter::builder()
        .with_default_directive(LevelFilter::INFO.into())
        .from_env()
        .map_err(|e| TelemetryError::InvalidFilter(e.to_string()))
}

/// Builds the subscriber writing to `writer`; [`init`] installs it globally. Colours (`ansi`)
/// only make sense on a terminal: in a pod they would end up as escape codes in the log store.
pub fn subscriber<W>(
    format: LogFormat,
    filter: EnvFilter,
    writer: W,
    ansi: bool,
) -> Box<dyn Subscriber + Send + Sync>
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(writer);
    match format {
        LogFormat::Text => Box::new(builder.finish()),
        LogFormat::Json => Box::new(
            builder
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .finish(),
        ),
    }
}

/// Installs the process-wide logger (stderr). Call once, before anything logs.
pub fn init(format: LogFormat) -> Result<(), TelemetryError> {
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let subscriber = subscriber(format, filter_from_env()?, std::io::stderr, ansi);
    tracing::subscriber::set_global_default(subscriber)
        .map_err(|_| TelemetryError::AlreadyInitialised)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Captured {
        type Writer = Captured;
        fn make_writer(&'w self) -> Self::Writer {
            self.clone()
        }
    }

    fn log_with(format: LogFormat, directive: &str) -> String {
        let out = Captured::default();
        let sub = subscriber(format, EnvFilter::new(directive), out.clone(), false);
        tracing::subscriber::with_default(sub, || {
            tracing::info!(revision = 7, "observer file changed");
            tracing::debug!("hidden at info");
        });
        let bytes = out.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap()
    }

    #[test]
    fn json_lines_carry_message_and_fields_at_top_level() {
        let text = log_with(LogFormat::Json, "info");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "debug line filtered out: {text}");
        let value: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
        assert_eq!(value["message"], "observer file changed");
        assert_eq!(value["revision"], 7);
        assert_eq!(value["level"], "INFO");
    }

    #[test]
    fn text_format_is_not_json_and_honours_the_filter() {
        let text = log_with(LogFormat::Text, "debug");
        assert!(text.contains("observer file changed"));
        assert!(text.contains("revision=7"));
        assert!(text.contains("hidden at info"));
        assert!(serde_json::from_str::<serde_json::Value>(text.lines().next().unwrap()).is_err());
    }
}
