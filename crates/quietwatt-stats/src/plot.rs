//! Box plots as SVG, written by hand: a plot is a few rectangles, lines and labels,
//! and writing them needs no plotting crate. Each series is one `<g class="series">`
//! carrying its name in `data-label`, so that a test (or a script) can find it.
//! They draw the overhead lab's figures and the energy models' regressions; the
//! lab's `png` module rasterizes them for viewers without SVG.
//!
//! A box spans the first to the third quartile with a line at the median; the
//! whiskers reach the furthest values within 1.5 IQR of the box (Tukey), and the
//! values beyond are drawn as circles, as in paper 002's Fig. 7 and 8.

use crate::quantile_sorted;
use std::fmt::Write;

/// Escapes text for SVG.
fn xml(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// About five round tick values covering `lo..=hi`.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let range = (hi - lo).max(f64::MIN_POSITIVE);
    let raw = range / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| range / s <= 6.0)
        .unwrap_or(10.0 * mag);
    // Integer multiples of the step: no drift from repeated addition.
    let (first, last) = ((lo / step).ceil() as i64, (hi / step + 1e-9).floor() as i64);
    (first..=last.min(first + 20))
        .map(|k| k as f64 * step)
        .collect()
}

/// The `(lo, hi)` of `values`' finite entries, padded by 5 %; `(0, 1)` when none.
fn padded_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (mut lo, mut hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    if !lo.is_finite() {
        (lo, hi) = (0.0, 1.0);
    }
    if hi - lo < 1e-12 * hi.abs().max(1.0) {
        (lo, hi) = (lo - 0.5 * lo.abs().max(1e-9), hi + 0.5 * hi.abs().max(1e-9));
    }
    let pad = (hi - lo) * 0.05;
    (lo - pad, hi + pad)
}

/// A tick value as a short label.
fn tick_label(t: f64) -> String {
    let s = format!("{t:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.to_string()
    }
}

/// Opens a standalone SVG document: the root element, its title, a white
/// background and the title centred at `title_x`.
fn open_svg(s: &mut String, width: f64, height: f64, title: &str, title_x: f64) {
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(s, r#"<title>{}</title>"#, xml(title));
    let _ = writeln!(
        s,
        r#"<rect x="0" y="0" width="{width:.0}" height="{height:.0}" fill="white"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{title_x:.1}" y="22" text-anchor="middle" font-size="14">{}</text>"#,
        xml(title)
    );
}

/// Horizontal grid lines with their labels at the y ticks of `lo..=hi`, from
/// `left` to `right`; `y` maps a value to its pixel row.
fn y_grid(s: &mut String, (lo, hi): (f64, f64), left: f64, right: f64, y: impl Fn(f64) -> f64) {
    for t in ticks(lo, hi) {
        let ty = y(t);
        let _ = writeln!(
            s,
            r##"<line x1="{left:.1}" y1="{ty:.1}" x2="{right:.1}" y2="{ty:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            left - 6.0,
            ty + 4.0,
            xml(&tick_label(t))
        );
    }
}

/// The plot area's frame (`(left, top, width, height)`) and the x axis' label
/// centred under it, near the bottom of a document `height` high.
fn frame(
    s: &mut String,
    (left, top, plot_w, plot_h): (f64, f64, f64, f64),
    height: f64,
    x_label: &str,
) {
    let _ = writeln!(
        s,
        r##"<rect x="{left:.1}" y="{top:.1}" width="{plot_w:.1}" height="{plot_h:.1}" fill="none" stroke="#000"/>"##
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        left + plot_w / 2.0,
        height - 10.0,
        xml(x_label)
    );
}

/// The y axis' label, written upwards at the left edge, centred on the plot.
fn y_axis_label(s: &mut String, top: f64, plot_h: f64, label: &str) {
    let mid = top + plot_h / 2.0;
    let _ = writeln!(
        s,
        r#"<text x="16" y="{mid:.1}" text-anchor="middle" transform="rotate(-90 16 {mid:.1})">{}</text>"#,
        xml(label)
    );
}

/// `label` cut into short lines: after each ':', and at a space before a digit or
/// a parenthesis (`quietwatt:perf 100 Hz` → `quietwatt:`, `perf`, `100 Hz`).
fn label_lines(label: &str) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = label.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let next = chars.get(i + 1).copied();
        if c == ' ' && next.is_some_and(|n| n.is_ascii_digit() || n == '(') && !cur.is_empty() {
            lines.push(std::mem::take(&mut cur));
            continue;
        }
        cur.push(c);
        if c == ':' {
            lines.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

/// One box.
#[derive(Debug, Clone)]
pub struct Series {
    /// Its name under the box (`none`, `quietwatt:perf 100 Hz`).
    pub label: String,
    /// The values.
    pub values: Vec<f64>,
}

/// A box plot of `series` side by side, as a standalone SVG document. Series
/// without a finite value get an empty slot with their label.
pub fn boxplot_svg(title: &str, y_label: &str, series: &[Series]) -> String {
    let (left, right, top, bottom) = (80.0, 20.0, 40.0, 70.0);
    let slot = 90.0;
    // Wide enough for the title at 14 px (about 8 px a character): a compare
    // of two commands once clipped "(powercap, EMULATED)" to "(powercap, EMULA".
    let n = series.len().max(1) as f64;
    let width = (left + right + slot * n).max(title.chars().count() as f64 * 8.0 + 40.0);
    let slot = (width - left - right) / n;
    let height = 420.0;
    let plot_h = height - top - bottom;
    let (lo, hi) = padded_range(series.iter().flat_map(|s| s.values.iter().copied()));
    let y = |v: f64| top + plot_h * (1.0 - (v - lo) / (hi - lo));

    let mut s = String::new();
    open_svg(&mut s, width, height, title, width / 2.0);
    // Axis, grid and ticks.
    y_grid(&mut s, (lo, hi), left, width - right, y);
    let _ = writeln!(
        s,
        r##"<line x1="{left:.1}" y1="{top:.1}" x2="{left:.1}" y2="{:.1}" stroke="#000"/>"##,
        top + plot_h
    );
    y_axis_label(&mut s, top, plot_h, y_label);
    for (i, ser) in series.iter().enumerate() {
        let cx = left + slot * (i as f64 + 0.5);
        let mut v: Vec<f64> = ser
            .values
            .iter()
            .copied()
            .filter(|x| x.is_finite())
            .collect();
        v.sort_by(f64::total_cmp);
        let _ = writeln!(
            s,
            r#"<g class="series" data-label="{}" data-n="{}">"#,
            xml(&ser.label),
            v.len()
        );
        if let (Some(q1), Some(med), Some(q3)) = (
            quantile_sorted(&v, 0.25),
            quantile_sorted(&v, 0.5),
            quantile_sorted(&v, 0.75),
        ) {
            let iqr = q3 - q1;
            let (wlo, whi) = (
                v.iter()
                    .copied()
                    .find(|&x| x >= q1 - 1.5 * iqr)
                    .unwrap_or(q1),
                v.iter()
                    .rev()
                    .copied()
                    .find(|&x| x <= q3 + 1.5 * iqr)
                    .unwrap_or(q3),
            );
            let hw = slot * 0.3;
            let fill = if i == 0 { "#f4a6a6" } else { "#a6c8f4" };
            let _ = writeln!(
                s,
                r##"<line x1="{cx:.1}" y1="{:.1}" x2="{cx:.1}" y2="{:.1}" stroke="#333"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#333"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#333"/>"##,
                y(whi),
                y(wlo),
                cx - hw / 2.0,
                y(whi),
                cx + hw / 2.0,
                y(whi),
                cx - hw / 2.0,
                y(wlo),
                cx + hw / 2.0,
                y(wlo)
            );
            let _ = writeln!(
                s,
                r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{fill}" stroke="#333"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#000" stroke-width="2"/>"##,
                cx - hw,
                y(q3),
                2.0 * hw,
                (y(q1) - y(q3)).max(0.5),
                cx - hw,
                y(med),
                cx + hw,
                y(med)
            );
            for &o in v.iter().filter(|&&x| x < wlo || x > whi) {
                let _ = writeln!(
                    s,
                    r##"<circle cx="{cx:.1}" cy="{:.1}" r="2.5" fill="none" stroke="#333"/>"##,
                    y(o)
                );
            }
        }
        // Horizontal lines under the box: long names wrapped at ':' and before a
        // number or a parenthesis, so no label runs into its neighbour.
        for (k, line) in label_lines(&ser.label).iter().enumerate() {
            let _ = writeln!(
                s,
                r#"<text x="{cx:.1}" y="{:.1}" text-anchor="middle" font-size="10">{}</text>"#,
                top + plot_h + 16.0 + 12.0 * k as f64,
                xml(line)
            );
        }
        s.push_str("</g>\n");
    }
    s.push_str("</svg>\n");
    s
}

/// One line of a line plot.
#[derive(Debug, Clone)]
pub struct Line {
    /// Its name in the legend.
    pub label: String,
    /// (x, y) points; drawn in x order.
    pub points: Vec<(f64, f64)>,
}

const PALETTE: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
];

/// Lines against a logarithmic x axis (sampling frequency, paper 002 Fig. 11 to
/// 13), with horizontal dashed reference lines (the baselines). Each line is a
/// `<g class="series">` with its `data-label`.
pub fn lines_svg(
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[Line],
    references: &[(String, f64)],
) -> String {
    // The legend sits right of the plot: room for `quietwatt:perf-stand-in POLL`.
    let (left, right, top, bottom) = (80.0, 300.0, 40.0, 50.0);
    let (width, height) = (760.0, 380.0);
    let (plot_w, plot_h) = (width - left - right, height - top - bottom);
    let xs: Vec<f64> = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.0))
        .filter(|x| x.is_finite() && *x > 0.0)
        .collect();
    let (xlo, xhi) = xs
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
            (a.min(x), b.max(x))
        });
    let (xlo, xhi) = if xlo.is_finite() {
        (xlo, xhi)
    } else {
        (1.0, 1000.0)
    };
    let (lx0, mut lx1) = (xlo.log10().floor(), xhi.log10().ceil());
    if lx1 <= lx0 {
        lx1 = lx0 + 1.0;
    }
    let (ylo, yhi) = padded_range(
        lines
            .iter()
            .flat_map(|l| l.points.iter().map(|p| p.1))
            .chain(references.iter().map(|r| r.1)),
    );
    let px = |x: f64| left + plot_w * (x.log10() - lx0) / (lx1 - lx0);
    let py = |y: f64| top + plot_h * (1.0 - (y - ylo) / (yhi - ylo));

    let mut s = String::new();
    open_svg(&mut s, width, height, title, left + plot_w / 2.0);
    y_grid(&mut s, (ylo, yhi), left, left + plot_w, py);
    let mut d = lx0;
    while d <= lx1 + 1e-9 {
        let x = px(10f64.powf(d));
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{top:.1}" x2="{x:.1}" y2="{:.1}" stroke="#eee"/><text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            top + plot_h,
            top + plot_h + 16.0,
            xml(&format!("{}", 10f64.powf(d)))
        );
        d += 1.0;
    }
    frame(&mut s, (left, top, plot_w, plot_h), height, x_label);
    y_axis_label(&mut s, top, plot_h, y_label);
    let legend = |s: &mut String, k: usize, color: &str, dash: &str, label: &str| {
        let ly = top + 10.0 + 16.0 * k as f64;
        let lx = left + plot_w + 12.0;
        let _ = writeln!(
            s,
            r#"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="2"{dash}/><text x="{:.1}" y="{:.1}">{}</text>"#,
            lx + 20.0,
            lx + 26.0,
            ly + 4.0,
            xml(label)
        );
    };
    for (k, (label, y)) in references.iter().enumerate() {
        if !y.is_finite() {
            continue;
        }
        let _ = writeln!(
            s,
            r##"<g class="reference" data-label="{}"><line x1="{left:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#d62728" stroke-dasharray="6 4"/></g>"##,
            xml(label),
            py(*y),
            left + plot_w,
            py(*y)
        );
        legend(&mut s, k, "#d62728", r#" stroke-dasharray="6 4""#, label);
    }
    for (i, line) in lines.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let mut pts: Vec<(f64, f64)> = line
            .points
            .iter()
            .copied()
            .filter(|(x, y)| x.is_finite() && *x > 0.0 && y.is_finite())
            .collect();
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let _ = writeln!(
            s,
            r#"<g class="series" data-label="{}" data-n="{}">"#,
            xml(&line.label),
            pts.len()
        );
        let path: Vec<String> = pts
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        if pts.len() > 1 {
            let _ = writeln!(
                s,
                r#"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2"/>"#,
                path.join(" ")
            );
        }
        for &(x, y) in &pts {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                px(x),
                py(y)
            );
        }
        s.push_str("</g>\n");
        legend(&mut s, references.len() + i, color, "", &line.label);
    }
    s.push_str("</svg>\n");
    s
}

/// One group of a scatter plot: its points and, when fitted, its least-squares line.
#[derive(Debug, Clone)]
pub struct FitGroup {
    /// Its name in the legend.
    pub label: String,
    /// (x, y) points.
    pub points: Vec<(f64, f64)>,
    /// `(slope, intercept)` of the fitted line, drawn over the points' x range.
    pub line: Option<(f64, f64)>,
}

/// Points and their fitted lines on linear axes (paper 003's regressions of time
/// or energy against the event count). Each group is a `<g class="series">` with
/// its `data-label`, one `<circle>` per point and one `<line class="fit">`.
pub fn scatter_fit_svg(title: &str, x_label: &str, y_label: &str, groups: &[FitGroup]) -> String {
    let (left, right, top, bottom) = (80.0, 220.0, 40.0, 50.0);
    let (width, height) = (760.0, 400.0);
    let (plot_w, plot_h) = (width - left - right, height - top - bottom);
    let all = || groups.iter().flat_map(|g| g.points.iter().copied());
    let (x_lo, x_hi) = padded_range(all().map(|p| p.0));
    let (y_lo, y_hi) = padded_range(all().map(|p| p.1));
    let x = |v: f64| left + plot_w * (v - x_lo) / (x_hi - x_lo);
    let y = |v: f64| top + plot_h * (1.0 - (v - y_lo) / (y_hi - y_lo));

    let mut s = String::new();
    open_svg(&mut s, width, height, title, left + plot_w / 2.0);
    y_grid(&mut s, (y_lo, y_hi), left, left + plot_w, y);
    for t in ticks(x_lo, x_hi) {
        let tx = x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{tx:.1}" y1="{:.1}" x2="{tx:.1}" y2="{:.1}" stroke="#000"/><text x="{tx:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            top + plot_h,
            top + plot_h + 5.0,
            top + plot_h + 18.0,
            xml(&tick_label(t))
        );
    }
    frame(&mut s, (left, top, plot_w, plot_h), height, x_label);
    y_axis_label(&mut s, top, plot_h, y_label);
    for (i, g) in groups.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let _ = writeln!(s, r#"<g class="series" data-label="{}">"#, xml(&g.label));
        for &(px, py) in g
            .points
            .iter()
            .filter(|p| p.0.is_finite() && p.1.is_finite())
        {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}" fill-opacity="0.6"/>"#,
                x(px),
                y(py)
            );
        }
        let xs = g.points.iter().map(|p| p.0).filter(|v| v.is_finite());
        let (a, b) = xs.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
        if let (Some((slope, intercept)), true) = (g.line, a.is_finite()) {
            let _ = writeln!(
                s,
                r#"<line class="fit" x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="{color}" stroke-width="2"/>"#,
                x(a),
                y(intercept + slope * a),
                x(b),
                y(intercept + slope * b)
            );
        }
        let ly = top + 10.0 + 18.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<circle cx="{:.1}" cy="{ly:.1}" r="4" fill="{color}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            left + plot_w + 16.0,
            left + plot_w + 26.0,
            ly + 4.0,
            xml(&g.label)
        );
        let _ = writeln!(s, "</g>");
    }
    let _ = writeln!(s, "</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_series_is_a_group_and_text_is_escaped() {
        let svg = boxplot_svg(
            "ep <1>",
            "seconds",
            &[
                Series {
                    label: "none".into(),
                    values: vec![1.0, 1.1, 1.2, 0.9, 3.0],
                },
                Series {
                    label: "a&b 10 Hz".into(),
                    values: vec![1.3, 1.2],
                },
                Series {
                    label: "empty".into(),
                    values: vec![f64::NAN],
                },
            ],
        );
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<g class=\"series\"").count(), 3);
        assert_eq!(svg.matches("<g ").count(), svg.matches("</g>").count());
        assert!(svg.contains("data-label=\"a&amp;b 10 Hz\""));
        assert!(svg.contains("ep &lt;1&gt;"));
        // 3.0 is beyond 1.5 IQR of the first box: drawn as a circle.
        assert_eq!(svg.matches("<circle").count(), 1);
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn a_long_title_widens_the_box_plot_instead_of_being_clipped() {
        let title = "Energy per run, 4 run(s) each (powercap, EMULATED)";
        let two = |v: f64| Series {
            label: "x".into(),
            values: vec![v, v + 1.0],
        };
        let svg = boxplot_svg(title, "energy (J)", &[two(1.0), two(2.0)]);
        let width: f64 = svg
            .split("width=\"")
            .nth(1)
            .and_then(|w| w.split('"').next())
            .and_then(|w| w.parse().ok())
            .expect("a width");
        assert!(
            width >= title.len() as f64 * 8.0,
            "{width} px for the title"
        );
    }

    #[test]
    fn a_line_plot_has_its_series_and_references() {
        let svg = lines_svg(
            "idle",
            "Hz",
            "busy",
            &[
                Line {
                    label: "quietwatt:perf".into(),
                    points: vec![(1.0, 0.01), (1000.0, 0.05), (10.0, 0.02)],
                },
                Line {
                    label: "empty".into(),
                    points: vec![],
                },
            ],
            &[("none".into(), 0.01)],
        );
        assert_eq!(svg.matches("<g class=\"series\"").count(), 2);
        assert!(svg.contains("data-label=\"quietwatt:perf\" data-n=\"3\""));
        assert!(svg.contains("<g class=\"reference\" data-label=\"none\""));
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn labels_wrap_at_colons_and_before_numbers() {
        assert_eq!(
            label_lines("quietwatt:perf-stand-in 1000 Hz"),
            vec!["quietwatt:", "perf-stand-in", "1000 Hz"]
        );
        assert_eq!(label_lines("none (baseline)"), vec!["none", "(baseline)"]);
        assert_eq!(label_lines("perf stat"), vec!["perf stat"]);
    }

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        let t = ticks(0.0, 1.0);
        assert_eq!(t.len(), 6, "{t:?}");
        assert!(t
            .iter()
            .zip([0.0, 0.2, 0.4, 0.6, 0.8, 1.0])
            .all(|(a, b)| (a - b).abs() < 1e-12));
        let t = ticks(0.013, 0.027);
        assert!(t.len() >= 3 && t.len() <= 8, "{t:?}");
    }
    #[test]
    fn a_scatter_has_a_group_per_scenario_with_its_points_and_fit() {
        let groups = vec![
            FitGroup {
                label: "odpa".into(),
                points: vec![(0.0, 1.0), (10.0, 21.0), (20.0, 41.0)],
                line: Some((2.0, 1.0)),
            },
            FitGroup {
                label: "npf & co".into(),
                points: vec![(0.0, 1.0), (20.0, 2.0)],
                line: None,
            },
        ];
        let svg = scatter_fit_svg("t", "faults", "us", &groups);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains(r#"data-label="odpa""#));
        assert!(svg.contains(r#"data-label="npf &amp; co""#), "escaped");
        // 5 points and 2 legend markers; one fitted line.
        assert_eq!(svg.matches("<circle").count(), 7);
        assert_eq!(svg.matches(r#"class="fit""#).count(), 1);
        assert_eq!(svg.matches("<g ").count(), svg.matches("</g>").count());
    }
}
