//! Log lines and their correlation with requests and traces.
//!
//! [`CorrelationLayer`] remembers, per span, the `request_id`, `trace_id`
//! and `span_id` fields the HTTP middleware records, so that [`JsonLines`]
//! can put them on every line logged inside a request without the code that
//! logs having to repeat them.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;
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

/// Shared, not copied: every line logged inside a request puts them on
/// (an `Arc` clone per line instead of a string allocation).
#[derive(Debug, Default, Clone)]
struct Correlation {
    request_id: Option<Arc<str>>,
    trace_id: Option<Arc<str>>,
    span_id: Option<Arc<str>>,
}

impl Correlation {
    fn is_empty(&self) -> bool {
        self.request_id.is_none() && self.trace_id.is_none() && self.span_id.is_none()
    }

    fn slot(&mut self, name: &str) -> Option<&mut Option<Arc<str>>> {
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
            *slot = Some(value.into());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if let Some(slot) = self.0.slot(field.name()) {
            *slot = Some(format!("{value:?}").into());
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
///
/// Written straight into the line (no intermediate map of values): the
/// long-running roles log a line per request.
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
        // A request's line is about 300 bytes: one allocation, not a
        // string grown by doubling.
        let mut line = JsonLine(String::with_capacity(512));
        line.timestamp(time::OffsetDateTime::now_utc());
        line.string("level", meta.level().as_str());
        line.string("target", meta.target());
        event.record(&mut line);

        if let Some(scope) = ctx.event_scope() {
            let mut correlation = Correlation::default();
            for (depth, span) in scope.enumerate() {
                if depth == 0 {
                    line.string("span", span.name());
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
                    line.string(key, &value);
                }
            }
        }
        line.0.push_str("}\n");
        writer.write_str(&line.0)
    }
}

/// The innermost span that has a value wins.
fn fill(slot: &mut Option<Arc<str>>, candidate: &Option<Arc<str>>) {
    if slot.is_none() {
        slot.clone_from(candidate);
    }
}

/// A JSON object being written: `{` and members so far.
#[derive(Default)]
struct JsonLine(String);

impl JsonLine {
    fn key(&mut self, key: &str) {
        self.0.push(if self.0.is_empty() { '{' } else { ',' });
        quote(&mut self.0, key);
        self.0.push(':');
    }

    fn string(&mut self, key: &str, value: &str) {
        self.key(key);
        quote(&mut self.0, value);
    }

    fn raw(&mut self, key: &str, value: fmt::Arguments<'_>) {
        self.key(key);
        let _ = fmt::Write::write_fmt(&mut self.0, value);
    }

    fn integer(&mut self, key: &str, value: impl itoa::Integer) {
        self.key(key);
        self.0.push_str(itoa::Buffer::new().format(value));
    }

    /// `value`'s text as a JSON string, written as it is formatted (no
    /// string of its own in between).
    fn display(&mut self, key: &str, value: impl fmt::Display) {
        self.key(key);
        self.0.push('"');
        let _ = fmt::Write::write_fmt(&mut Escaping(&mut self.0), format_args!("{value}"));
        self.0.push('"');
    }

    /// RFC 3339 in UTC, as `time` writes it, without a string of its own:
    /// it needs no escaping.
    fn timestamp(&mut self, now: time::OffsetDateTime) {
        self.key("timestamp");
        // At most 30 bytes: `2026-12-05T10:11:59.123456789Z`.
        const ROOM: usize = 40;
        let mut text = [0u8; ROOM];
        let mut out = &mut text[..];
        // The length is what the slice lost: `format_into`'s own count
        // leaves out the fraction's digits (time 0.3.55).
        let formatted = now
            .format_into(&mut out, &time::format_description::well_known::Rfc3339)
            .is_ok();
        let len = ROOM - out.len();
        let written = if formatted {
            std::str::from_utf8(&text[..len]).unwrap_or_default()
        } else {
            ""
        };
        self.0.push('"');
        self.0.push_str(written);
        self.0.push('"');
    }

    /// An event field: named apart from the line's own keys.
    fn field(&mut self, field: &Field) -> Option<Cow<'static, str>> {
        let name = field.name();
        // `log` records bridged into tracing carry their metadata as fields.
        if name.starts_with("log.") {
            return None;
        }
        Some(if RESERVED.contains(&name) {
            Cow::Owned(format!("field.{name}"))
        } else {
            Cow::Borrowed(name)
        })
    }
}

/// `value` as a JSON string.
fn quote(out: &mut String, value: &str) {
    out.reserve(value.len() + 2);
    out.push('"');
    escape(out, value);
    out.push('"');
}

/// `value` as the inside of a JSON string.
fn escape(out: &mut String, value: &str) {
    // Nearly every key and value (names, ids, labels) needs no escaping:
    // copied as it is, without serialising it into a string of its own.
    if !value.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20) {
        out.push_str(value);
        return;
    }
    // Serialising a `&str` cannot fail, and the output is UTF-8 within
    // its quotes.
    if let Ok(quoted) = serde_json::to_string(value) {
        out.push_str(&quoted[1..quoted.len() - 1]);
    }
}

/// A `fmt::Write` that escapes what is written into a JSON string.
struct Escaping<'a>(&'a mut String);

impl fmt::Write for Escaping<'_> {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        escape(self.0, text);
        Ok(())
    }
}

impl Visit for JsonLine {
    fn record_f64(&mut self, field: &Field, value: f64) {
        if let Some(key) = self.field(field) {
            if value.is_finite() {
                self.raw(&key, format_args!("{value}"));
            } else {
                self.string(&key, &value.to_string());
            }
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Some(key) = self.field(field) {
            self.integer(&key, value);
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if let Some(key) = self.field(field) {
            self.integer(&key, value);
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if let Some(key) = self.field(field) {
            self.raw(&key, format_args!("{value}"));
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if let Some(key) = self.field(field) {
            self.string(&key, value);
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        if let Some(key) = self.field(field) {
            self.display(&key, value);
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if let Some(key) = self.field(field) {
            self.display(&key, format_args!("{value:?}"));
        }
    }
}

/// Span fields as the JSON lines need them: not at all ([`JsonLines`]
/// reads only the correlation fields, which [`CorrelationLayer`] keeps).
/// Without this the fmt layer would format every span's fields into text
/// on creation and on every `record`, for nothing.
#[derive(Debug, Default)]
pub(crate) struct NoSpanFields;

impl<'w> FormatFields<'w> for NoSpanFields {
    fn format_fields<R: tracing_subscriber::field::RecordFields>(
        &self,
        _writer: Writer<'w>,
        _fields: R,
    ) -> fmt::Result {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn quoting_writes_what_serde_json_writes() {
        for value in [
            "",
            "plain-id_01",
            "tenant acme/run 7",
            "quote \" inside",
            "back\\slash",
            "line\nbreak\ttab\r",
            "\u{1}\u{1f}\u{7f}",
            "é ü 漢字 🙂",
        ] {
            let mut out = String::new();
            quote(&mut out, value);
            assert_eq!(out, serde_json::to_string(value).unwrap(), "{value:?}");
        }
    }

    #[test]
    fn the_timestamp_is_what_time_writes_in_rfc3339() {
        use time::format_description::well_known::Rfc3339;
        for (seconds, nanos) in [
            (0, 0),
            (1_796_464_319, 0),
            (1_796_464_319, 100_000_000),
            (1_796_464_319, 123_450_000),
            (1_796_464_319, 999_999_999),
            (253_402_300_799, 1),
        ] {
            let instant = time::OffsetDateTime::from_unix_timestamp(seconds)
                .unwrap()
                .replace_nanosecond(nanos)
                .unwrap();
            let mut line = JsonLine::default();
            line.timestamp(instant);
            let expected = format!(
                "{{{}:{}",
                serde_json::to_string("timestamp").unwrap(),
                serde_json::to_string(&instant.format(&Rfc3339).unwrap()).unwrap()
            );
            assert_eq!(line.0, expected);
        }
    }

    #[test]
    fn debug_and_error_values_are_escaped_as_serde_json_escapes_their_text() {
        let error = std::io::Error::other("disk \"full\"\n\u{1}");
        let debugged = ("quo\"te", '\t', "é");
        let mut line = JsonLine::default();
        line.display("d", format_args!("{debugged:?}"));
        line.display("e", &error as &dyn std::error::Error);
        let value: serde_json::Value = serde_json::from_str(&format!("{}}}", line.0)).unwrap();
        assert_eq!(value["d"], format!("{debugged:?}"));
        assert_eq!(value["e"], error.to_string());
        let mut expected = String::new();
        quote(&mut expected, &error.to_string());
        assert!(line.0.ends_with(&expected), "{}", line.0);
    }

    #[test]
    fn a_line_is_one_json_object_with_typed_fields_and_renamed_reserved_keys() {
        let lines = corkboard_testkit::LogCapture::default();
        let subscriber = tracing_subscriber::registry().with(CorrelationLayer).with(
            tracing_subscriber::fmt::layer()
                .event_format(JsonLines)
                .fmt_fields(NoSpanFields)
                .with_writer(lines.clone()),
        );
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("outer", request_id = "req-1", tenant = "acme");
            let _entered = span.enter();
            tracing::warn!(
                level = "shadowed",
                count = 3u64,
                delta = -2i64,
                ratio = 0.5f64,
                ok = true,
                text = "quote \" newline \n é",
                "said {}",
                "hello"
            );
        });
        let text = lines.text();
        assert_eq!(text.lines().count(), 1, "{text}");
        let line: serde_json::Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(line["message"], "said hello");
        assert_eq!(line["level"], "WARN");
        assert_eq!(line["field.level"], "shadowed");
        assert_eq!(line["count"], 3);
        assert_eq!(line["delta"], -2);
        assert_eq!(line["ratio"], 0.5);
        assert_eq!(line["ok"], true);
        assert_eq!(line["text"], "quote \" newline \n é");
        assert_eq!(line["span"], "outer");
        assert_eq!(line["request_id"], "req-1");
        assert!(line.get("tenant").is_none(), "span fields are not copied");
        assert!(line["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')));
    }
}
