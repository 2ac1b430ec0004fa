//! Structured logs: text for people, JSON (one object per line, fields at the top level)
//! for log pipelines.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// Quiet by default for the libraries, whose info lines say nothing an operator needs.
const DEFAULT_FILTER: &str = "info,aws_config=warn,aws_smithy_runtime=warn,kube=warn,hyper=warn";

pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        // Colour codes are noise in `kubectl logs`: only for a terminal.
        .with_ansi(std::io::stdout().is_terminal())
        .with_writer(std::io::stdout);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .init(),
    }
}
