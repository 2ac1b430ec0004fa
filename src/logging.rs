//! Structured logs: text for people, JSON (one object per line, fields at the top level)
//! for log pipelines.

use std::str::FromStr;

use std::io::IsTerminal;

use serde_json::{Map, Value};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::filter::{EnvFilter, filter_fn};
use tracing_subscriber::fmt::format::{Format, Json, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, fmt};

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl FromStr for LogFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // Any letter case, as the booleans take.
        match s.to_ascii_lowercase().as_str() {
            "text" => Ok(Self::Text),
            "json" => Ok(Self::Json),
            _ => Err("must be 'text' or 'json' (any letter case)".into()),
        }
    }
}

/// Quiet by default for the libraries, whose info lines say nothing an operator needs.
/// kube's HTTP layer logs every failed attempt as an ERROR with no namespace: our own lines
/// carry what failed, where, and whether a retry fixed it. aws-config warns, with a
/// multi-line error dump, each time instance metadata has no region for it, which is every
/// run outside EC2; when no region is found our own error says what to set. kube's client
/// warns with the whole response text when it cannot parse an answer, and a Secret's answer
/// holds its passwords: our own line says the request failed, without the body. aws-config
/// warns with the whole STS response when STS refuses a web identity token or an AssumeRole:
/// our own line names the source, the role and STS's code and message. RUST_LOG=debug
/// (which replaces this filter) shows them all.
const DEFAULT_FILTER: &str = "info,aws_config=warn,aws_config::imds::region=error,aws_config::web_identity_token=error,aws_config::sts::assume_role=error,aws_smithy_runtime=warn,kube=warn,kube_client::client=error,kube_client::client::builder=off,hyper=warn";

pub fn init(format: LogFormat) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let layer = fmt::layer()
        .with_target(false)
        // Colour codes are noise in `kubectl logs`: only for a terminal.
        .with_ansi(std::io::stdout().is_terminal())
        .with_writer(std::io::stdout);
    let layer = match format {
        LogFormat::Text => layer.boxed(),
        LogFormat::Json => layer
            .json()
            .event_format(FlatJson(
                fmt::format()
                    .json()
                    .with_target(false)
                    .flatten_event(true)
                    .with_current_span(false)
                    .with_span_list(false),
            ))
            .boxed(),
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(no_library_trace())
        .with(layer)
        .init();
}

/// JSON lines with every field at the top level, the enclosing spans' too: a fleet's lines
/// carry their `cluster` as any other field (the span is `info_span!("cluster", cluster)`). An
/// event's own field wins over a span's of the same name.
struct FlatJson(Format<Json>);

impl<S, N> FormatEvent<S, N> for FlatJson
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        let spans: Vec<Map<String, Value>> = ctx
            .event_scope()
            .into_iter()
            .flat_map(|scope| scope.from_root())
            .filter_map(|span| {
                let extensions = span.extensions();
                let fields = extensions.get::<FormattedFields<N>>()?;
                serde_json::from_str(fields.fields.as_str()).ok()
            })
            .collect();
        if spans.is_empty() {
            return writer.write_str(&line);
        }
        let Ok(mut object) = serde_json::from_str::<Map<String, Value>>(line.trim_end()) else {
            return writer.write_str(&line);
        };
        for fields in spans {
            for (name, value) in fields {
                object.entry(name).or_insert(value);
            }
        }
        writeln!(writer, "{}", Value::Object(object))
    }
}

/// Libraries log request and response bodies at TRACE: the AWS SDK prints the ECR token, kube
/// the Secrets it sends. Whatever RUST_LOG asks for, their TRACE events are dropped.
fn no_library_trace<S: tracing::Subscriber>() -> impl Layer<S> {
    filter_fn(|meta| meta.target().starts_with("ecr_refresh") || *meta.level() <= Level::DEBUG)
}

/// An error and its causes, `: `-separated: the top-level message of a client error ("error
/// sending request") rarely says why.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut parts = vec![e.to_string()];
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        // Wrappers often repeat their cause's message: say each thing once.
        if !parts.last().is_some_and(|last| last.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}
