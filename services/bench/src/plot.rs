//! PNG plots of the cost curves (`curve` records): for each statistic (p50,
//! p99), latency in ms against board size, log-log, one line per store and
//! operation; and of the tenants curve (`tenants` records): latency
//! against the tenant count on one MongoDB database. Drawn with `plotters`' bitmap backend; the labels' font is a
//! TrueType file read at run time (ab_glyph), so no fontconfig or freetype
//! is needed.

use crate::error::{BenchError, Result};
use crate::record::{self, Record};
use crate::scenario::curves::OPERATIONS;
use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The files written, relative to the output directory.
pub const FILES: [&str; 2] = ["curves-p50.png", "curves-p99.png"];

fn plot_error(err: impl std::fmt::Display) -> BenchError {
    BenchError::process("plot", err.to_string())
}

/// Which latency figure of a record a plot shows.
type Statistic = fn(&Record) -> Option<f64>;

/// One line: (store, operation) → (issues, ms) points in size order.
type Series = BTreeMap<(String, String), Vec<(f64, f64)>>;

fn series(records: &[Record], statistic: Statistic) -> Series {
    let mut out: Series = BTreeMap::new();
    for r in records.iter().filter(|r| r.kind == "curve") {
        let (Some(issues), Some(ms)) = (r.values.get("issues").copied(), statistic(r)) else {
            continue;
        };
        let store = r.labels.get("store").cloned().unwrap_or_default();
        let key = (
            if r.labels.get("seed_path").is_some_and(|p| p == "bulk") {
                format!("{store} (bulk-seeded)")
            } else {
                store
            },
            r.labels.get("tool").cloned().unwrap_or_default(),
        );
        out.entry(key).or_default().push((issues, ms.max(0.001)));
    }
    for points in out.values_mut() {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// Writes [`FILES`] under `output` from the `curve` records in `input`;
/// the paths written.
pub fn write(input: &Path, output: &Path, font: &Path) -> Result<Vec<PathBuf>> {
    let records = record::read(input)?;
    let bytes = std::fs::read(font).map_err(BenchError::io(format!(
        "read the plot font {} (pass --font with any .ttf)",
        font.display()
    )))?;
    // plotters keeps registered fonts for the process's lifetime.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| BenchError::Usage(format!("{} is not a usable font", font.display())))?;
    std::fs::create_dir_all(output)
        .map_err(BenchError::io(format!("create {}", output.display())))?;
    let stats: [(&str, Statistic); 2] = [("p50", |r| r.p50_ms), ("p99", |r| r.p99_ms)];
    let mut written = Vec::new();
    let has_tenants = records.iter().any(|r| r.kind == "tenants");
    for ((name, statistic), file) in stats.into_iter().zip(FILES) {
        let lines = series(&records, statistic);
        if lines.is_empty() {
            if has_tenants {
                // A results file of the tenants curve alone.
                break;
            }
            return Err(BenchError::Usage(format!(
                "{} has no curve records (run corkboard-bench curves first)",
                input.display()
            )));
        }
        let path = output.join(file);
        draw(&path, name, &lines)?;
        written.push(path);
    }
    if has_tenants {
        let path = output.join(TENANT_FILE);
        draw_tenants(&path, &tenant_series(&records))?;
        written.push(path);
    }
    Ok(written)
}

/// The tenants curve's plot, relative to the output directory.
pub const TENANT_FILE: &str = "tenants.png";

/// The tenants records plotted: latency against the tenant count.
const TENANT_OPERATIONS: [&str; 5] = [
    "create_issue existing",
    "create_issue random",
    "list_issues existing",
    "list_issues random",
    "first write new tenant",
];

/// (operation, statistic) → (tenants, ms) points in count order.
fn tenant_series(records: &[Record]) -> Series {
    let mut out: Series = BTreeMap::new();
    for r in records.iter().filter(|r| r.kind == "tenants") {
        let tool = r.labels.get("tool").cloned().unwrap_or_default();
        if !TENANT_OPERATIONS.contains(&tool.as_str()) {
            continue;
        }
        let Some(tenants) = r.values.get("tenants").copied() else {
            continue;
        };
        for (name, ms) in [("p50", r.p50_ms), ("p99", r.p99_ms)] {
            if let Some(ms) = ms {
                out.entry((tool.clone(), name.to_owned()))
                    .or_default()
                    .push((tenants.max(1.0), ms.max(0.001)));
            }
        }
    }
    for points in out.values_mut() {
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

fn draw_tenants(path: &Path, lines: &Series) -> Result<()> {
    let points = lines.values().flatten();
    let (mut x_max, mut y_min, mut y_max) = (1.0f64, f64::INFINITY, 0.0f64);
    for &(x, y) in points {
        x_max = x_max.max(x);
        y_min = y_min.min(y);
        y_max = y_max.max(y);
    }
    if !y_min.is_finite() {
        return Err(BenchError::Usage(
            "the tenants records have no latency figures".into(),
        ));
    }
    let root = BitMapBackend::new(path, (1100, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "latency by tenant count (one MongoDB database, a collection per tenant)",
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(
            (0.5..x_max * 40.0).log_scale(),
            ((y_min / 2.0).max(0.001)..y_max * 2.0).log_scale(),
        )
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc("tenants in the database")
        .x_labels(8)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y}"))
        .y_desc("ms")
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(plot_error)?;
    for ((operation, statistic), points) in lines {
        let shade = TENANT_OPERATIONS
            .iter()
            .position(|o| o == operation)
            .unwrap_or(TENANT_OPERATIONS.len());
        let color = Palette99::pick(shade).to_rgba();
        let label = format!("{operation} {statistic}");
        // p50 solid, p99 dashed: the colour names the operation.
        if statistic == "p50" {
            chart
                .draw_series(LineSeries::new(
                    points.iter().copied(),
                    color.stroke_width(2),
                ))
                .map_err(plot_error)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        } else {
            chart
                .draw_series(DashedLineSeries::new(
                    points.iter().copied(),
                    8,
                    5,
                    color.stroke_width(2),
                ))
                .map_err(plot_error)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 8, y)], color.stroke_width(2))
                });
        }
        chart
            .draw_series(points.iter().map(|&p| Circle::new(p, 4, color.filled())))
            .map_err(plot_error)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(plot_error)?;
    root.present().map_err(plot_error)?;
    Ok(())
}

fn draw(path: &Path, statistic: &str, lines: &Series) -> Result<()> {
    let points = lines.values().flatten();
    let (mut x_max, mut y_min, mut y_max) = (1.0f64, f64::INFINITY, 0.0f64);
    let mut x_min = f64::INFINITY;
    for &(x, y) in points {
        x_min = x_min.min(x);
        x_max = x_max.max(x);
        y_min = y_min.min(y);
        y_max = y_max.max(y);
    }
    let root = BitMapBackend::new(path, (1100, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_error)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{statistic} latency by board size (one tenant, store calls)"),
            ("sans-serif", 22),
        )
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(64)
        .build_cartesian_2d(
            // Room on the right for the legend, clear of the lines.
            ((x_min / 2.0).max(1.0)..x_max * 40.0).log_scale(),
            ((y_min / 2.0).max(0.001)..y_max * 2.0).log_scale(),
        )
        .map_err(plot_error)?;
    chart
        .configure_mesh()
        .x_desc("issues in the tenant")
        .x_labels(8)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y}"))
        .y_desc(format!("{statistic} ms"))
        .label_style(("sans-serif", 14))
        .draw()
        .map_err(plot_error)?;
    for ((store, operation), points) in lines {
        let shade = OPERATIONS
            .iter()
            .position(|o| o == operation)
            .unwrap_or(OPERATIONS.len());
        let color = Palette99::pick(shade).to_rgba();
        // SQLite solid with filled points (its bulk-seeded board thinner),
        // MongoDB dashed with hollow ones: the store reads at a glance, the
        // colour names the operation.
        let filled = store.starts_with("sqlite");
        let width = if store.contains("bulk") { 1 } else { 2 };
        let label = format!("{store} {operation}");
        if filled {
            chart
                .draw_series(LineSeries::new(
                    points.iter().copied(),
                    color.stroke_width(width),
                ))
                .map_err(plot_error)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(width))
                });
        } else {
            chart
                .draw_series(DashedLineSeries::new(
                    points.iter().copied(),
                    8,
                    5,
                    color.stroke_width(width),
                ))
                .map_err(plot_error)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 8, y)], color.stroke_width(width))
                });
        }
        chart
            .draw_series(points.iter().map(|&p| {
                let style = if filled {
                    color.filled()
                } else {
                    color.stroke_width(2)
                };
                Circle::new(p, 4, style)
            }))
            .map_err(plot_error)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(plot_error)?;
    root.present().map_err(plot_error)?;
    Ok(())
}
