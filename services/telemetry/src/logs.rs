//! Log lines and their correlation with requests and traces.
//!
//! [`CorrelationLayer`] remembers, per span, the `request_id`, `trace_id`
//! and `span_id` fields the HTTP middleware records, so that [`JsonLines`]
//! can put them on every line logged inside a request without the code that
//! logs having to repeat them.

use serde_json::{Map, Value};
use std::fmt;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber, span};
use tracing_subscriber::Layer;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// Span field carrying the request id (see [`crate::http::RequestId`]).
pub const REQUEST_ID_FIELD: &str = "request_id";
/// Span field carrying the W3C trace id (32 lowercase hex digits).
pub const TRACE_ID_FIELD: &str = "trace_id";
/// Span field carrying the OpenTelemetry span id (16 lowercase hex digits).
pub const SPAN_ID_FIELD: &str = "span_id";

#[derive(Debug, Default, Clone)]
struct Correlation {
    request_id: Option<String>,
    trace_id: Option<String>,
    span_id: Option<String>,
}

impl Correlation {
    fn is_empty(&self) -> bool {
        self.request_id.is_none() && self.trace_id.is_none() && self.span_id.is_none()
    }

    fn slot(&mut self, name: &str) -> Option<&mut Option<String>> {
        match name {
            REQUEST_ID_FIELD => Some(&mut self.request_id),
            TRACE_ID_FIELD => Some(&mut self.trace_id),
            SPAN_ID_FIELD => Some(&mut self.span_id),
            _ => None,
        }
    }
}

struct CorrelationVisitor<'a>(&'a mut Correlation);

impl Visit for CorrelationVisitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if let Some(slot) = self.0.slot(field.name()) {
            *slot = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if let Some(slot) = self.0.slot(field.name()) {
            *slot = Some(format!("{value:?}"));
        }
    }
}

/// Keeps each span's correlation fields in its extensions.
#[derive(Debug, Default)]
pub(crate) struct CorrelationLayer;

impl<S> Layer<S> for CorrelationLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let mut found = Correlation::default();
        attrs.record(&mut CorrelationVisitor(&mut found));
        if !found.is_empty()
            && let Some(span) = ctx.span(id)
        {
            span.extensions_mut().insert(found);
        }
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        if let Some(existing) = extensions.get_mut::<Correlation>() {
            values.record(&mut CorrelationVisitor(existing));
        } else {
            let mut found = Correlation::default();
            values.record(&mut CorrelationVisitor(&mut found));
            if !found.is_empty() {
                extensions.insert(found);
            }
        }
    }
}

/// One JSON object per line: `timestamp`, `level`, `target`, `message`,
/// the event's fields, the innermost `span` name, and the nearest
/// `request_id`, `trace_id` and `span_id` in the event's scope.
#[derive(Debug, Default)]
pub(crate) struct JsonLines;

const RESERVED: [&str; 7] = [
    "timestamp",
    "level",
    "target",
    "span",
    REQUEST_ID_FIELD,
    TRACE_ID_FIELD,
    SPAN_ID_FIELD,
];

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut line = Map::new();
        let timestamp = time::OffsetDateTime::now_utc()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        line.insert("timestamp".into(), Value::String(timestamp));
        line.insert("level".into(), Value::String(meta.level().as_str().into()));
        line.insert("target".into(), Value::String(meta.target().into()));

        let mut fields = JsonVisitor(Map::new());
        event.record(&mut fields);
        for (key, value) in fields.0 {
            // An event field named like a line key must not overwrite it.
            let key = if RESERVED.contains(&key.as_str()) {
                format!("field.{key}")
            } else {
                key
            };
            line.insert(key, value);
        }

        if let Some(scope) = ctx.event_scope() {
            let mut correlation = Correlation::default();
            for (depth, span) in scope.enumerate() {
                if depth == 0 {
                    line.insert("span".into(), Value::String(span.name().into()));
                }
                if let Some(found) = span.extensions().get::<Correlation>() {
                    fill(&mut correlation.request_id, &found.request_id);
                    fill(&mut correlation.trace_id, &found.trace_id);
                    fill(&mut correlation.span_id, &found.span_id);
                }
            }
            for (key, value) in [
                (REQUEST_ID_FIELD, correlation.request_id),
                (TRACE_ID_FIELD, correlation.trace_id),
                (SPAN_ID_FIELD, correlation.span_id),
            ] {
                if let Some(value) = value {
                    line.insert(key.into(), Value::String(value));
                }
            }
        }

        let text = serde_json::to_string(&line).map_err(|_| fmt::Error)?;
        writer.write_str(&text)?;
        writer.write_char('\n')
    }
}

/// The innermost span that has a value wins.
fn fill(slot: &mut Option<String>, candidate: &Option<String>) {
    if slot.is_none() {
        slot.clone_from(candidate);
    }
}

struct JsonVisitor(Map<String, Value>);

impl JsonVisitor {
    fn put(&mut self, field: &Field, value: Value) {
        // `log` records bridged into tracing carry their metadata as fields.
        if !field.name().starts_with("log.") {
            self.0.insert(field.name().to_owned(), value);
        }
    }
}

impl Visit for JsonVisitor {
    fn record_f64(&mut self, field: &Field, value: f64) {
        let value = serde_json::Number::from_f64(value)
            .map_or_else(|| Value::String(value.to_string()), Value::Number);
        self.put(field, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.put(field, Value::from(value));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.put(field, Value::from(value));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.put(field, Value::Bool(value));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, Value::String(value.to_owned()));
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        self.put(field, Value::String(value.to_string()));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, Value::String(format!("{value:?}")));
    }
}
