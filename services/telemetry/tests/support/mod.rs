//! Helpers shared by this crate's integration tests.

#![allow(dead_code)]

use std::collections::BTreeMap;

pub use corkboard_testkit::LogCapture;

/// The secrets the tests send; none may appear in spans, logs or metrics.
pub const FAKE_TOKEN: &str = "cbr_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
pub const FAKE_JWT: &str = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJhZG1pbiIsInJvbGUiOiJwbGF0Zm9ybS1hZG1pbiJ9.c2lnbmF0dXJlLXNpZ25hdHVyZQ";
pub const ARGUMENT_VALUE: &str = "argument-value-4f1c-do-not-log";
pub const SECRETS: [&str; 3] = [FAKE_TOKEN, FAKE_JWT, ARGUMENT_VALUE];

/// The traceparent an orchestrator would send.
pub const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
pub const PARENT_SPAN_ID: &str = "00f067aa0ba902b7";
pub fn traceparent() -> String {
    format!("00-{TRACE_ID}-{PARENT_SPAN_ID}-01")
}

/// A `tools/call` whose arguments carry [`ARGUMENT_VALUE`].
pub fn tool_call_body() -> String {
    corkboard_testkit::mcp::tools_call(
        7,
        "create_issue",
        serde_json::json!({"title": ARGUMENT_VALUE, "body": FAKE_TOKEN}),
    )
    .to_string()
}

/// One sample line of the Prometheus text format.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub value: f64,
}

/// Parses the Prometheus text exposition format (0.0.4) strictly enough to
/// catch what a scraper would reject: every line is a well-formed comment
/// or sample, every sample belongs to a family declared by `# TYPE` before
/// it, names and label names are valid, label values are properly quoted
/// and escaped, values are floats, and every histogram is consistent
/// (cumulative buckets, a `+Inf` bucket equal to `_count`).
pub fn parse_prometheus(text: &str) -> Result<Vec<Sample>, String> {
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let at = |why: &str| format!("line {}: {why}: {line:?}", number + 1);
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let keyword = parts.next().unwrap_or_default();
            let name = parts.next().ok_or_else(|| at("comment without a name"))?;
            if !valid_name(name) {
                return Err(at("invalid metric name"));
            }
            match keyword {
                "HELP" => {}
                "TYPE" => {
                    let kind = parts.next().ok_or_else(|| at("TYPE without a type"))?;
                    if !["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind) {
                        return Err(at("unknown type"));
                    }
                    if types.insert(name.to_owned(), kind.to_owned()).is_some() {
                        return Err(at("family declared twice"));
                    }
                }
                _ => return Err(at("unknown comment keyword")),
            }
            continue;
        }
        if line.starts_with('#') {
            return Err(at("malformed comment"));
        }
        let sample = parse_sample(line).map_err(|e| at(&e))?;
        let family =
            family_of(&sample.name, &types).ok_or_else(|| at("sample of an undeclared family"))?;
        if types.get(&family).map(String::as_str) == Some("counter") && sample.value < 0.0 {
            return Err(at("negative counter"));
        }
        samples.push(sample);
    }
    check_histograms(&samples, &types)?;
    Ok(samples)
}

fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn family_of(name: &str, types: &BTreeMap<String, String>) -> Option<String> {
    if types.contains_key(name) {
        return Some(name.to_owned());
    }
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix)
            && matches!(
                types.get(base).map(String::as_str),
                Some("histogram" | "summary")
            )
        {
            return Some(base.to_owned());
        }
    }
    None
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line.find(['{', ' ']).ok_or("sample without a value")?;
    let name = &line[..name_end];
    if !valid_name(name) {
        return Err("invalid metric name".into());
    }
    let mut labels = BTreeMap::new();
    let mut rest = &line[name_end..];
    if let Some(mut s) = rest.strip_prefix('{') {
        loop {
            if let Some(after) = s.strip_prefix('}') {
                rest = after;
                break;
            }
            let eq = s.find('=').ok_or("label without =")?;
            let label = &s[..eq];
            if !valid_name(label) || label.contains(':') {
                return Err(format!("invalid label name {label:?}"));
            }
            s = s[eq + 1..]
                .strip_prefix('"')
                .ok_or("label value not quoted")?;
            let mut value = String::new();
            let mut chars = s.char_indices();
            let close = loop {
                let (i, c) = chars.next().ok_or("unterminated label value")?;
                match c {
                    '\\' => match chars.next().ok_or("dangling escape")?.1 {
                        'n' => value.push('\n'),
                        '\\' => value.push('\\'),
                        '"' => value.push('"'),
                        other => return Err(format!("bad escape \\{other}")),
                    },
                    '"' => break i,
                    c => value.push(c),
                }
            };
            if labels.insert(label.to_owned(), value).is_some() {
                return Err(format!("label {label} repeated"));
            }
            s = &s[close + 1..];
            if let Some(after) = s.strip_prefix(',') {
                s = after;
            } else if !s.starts_with('}') {
                return Err("expected , or } after a label".into());
            }
        }
    }
    let rest = rest.strip_prefix(' ').ok_or("no space before the value")?;
    let mut fields = rest.split(' ');
    let value = fields.next().ok_or("sample without a value")?;
    let value = match value {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        v => v
            .parse::<f64>()
            .map_err(|e| format!("bad value {v:?}: {e}"))?,
    };
    if let Some(ts) = fields.next() {
        ts.parse::<i64>().map_err(|_| "bad timestamp")?;
    }
    if fields.next().is_some() {
        return Err("trailing data".into());
    }
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

fn check_histograms(samples: &[Sample], types: &BTreeMap<String, String>) -> Result<(), String> {
    for (family, kind) in types {
        if kind != "histogram" {
            continue;
        }
        // Group series by their labels other than `le`.
        let mut series: BTreeMap<BTreeMap<String, String>, Vec<(f64, f64)>> = BTreeMap::new();
        let bucket_name = format!("{family}_bucket");
        for s in samples.iter().filter(|s| s.name == bucket_name) {
            let mut key = s.labels.clone();
            let le = key
                .remove("le")
                .ok_or(format!("{family}: bucket without le"))?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse::<f64>()
                    .map_err(|_| format!("{family}: bad le {le}"))?
            };
            series.entry(key).or_default().push((le, s.value));
        }
        for (key, mut buckets) in series {
            buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
            if buckets.windows(2).any(|w| w[1].1 < w[0].1) {
                return Err(format!("{family}{key:?}: buckets not cumulative"));
            }
            let inf = buckets
                .last()
                .filter(|b| b.0.is_infinite())
                .ok_or(format!("{family}{key:?}: no +Inf bucket"))?
                .1;
            let count = samples
                .iter()
                .find(|s| s.name == format!("{family}_count") && s.labels == key)
                .ok_or(format!("{family}{key:?}: no _count"))?
                .value;
            if (inf - count).abs() > f64::EPSILON {
                return Err(format!(
                    "{family}{key:?}: +Inf bucket {inf} != count {count}"
                ));
            }
        }
    }
    Ok(())
}

/// The value of the sample `name` whose labels are exactly `labels`.
pub fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let want: BTreeMap<String, String> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    samples
        .iter()
        .find(|s| s.name == name && s.labels == want)
        .map(|s| s.value)
}

/// The tool vocabulary these tests record, set the way the binary sets the
/// product's (once per process; every test sets the same list).
pub const TOOLS: &[&str] = &[
    "create_issue",
    "get_issue",
    "list_issues",
    "update_issue",
    "add_comment",
];

pub fn set_tool_vocabulary() {
    corkboard_telemetry::mcp::set_known_tools(TOOLS);
}
