//! The RFC 2544 plot: grouped bars by frame size, one bar per series (seed 004's Figures
//! 11–12 compare "optimized" and "non-optimized" forwarding this way), the zero-loss rate on
//! the y axis in frames/s, the % of the generator's maximum above each bar. Plain SVG,
//! written by hand: no plotting dependency for one chart.

use std::fmt::Write;

/// One series: its name and, per frame size, (size bytes, zero-loss frames/s, offered
/// maximum frames/s).
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    pub points: Vec<(usize, f64, f64)>,
}

const COLOURS: [&str; 6] = [
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#b07aa1",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The chart as an SVG document.
pub fn svg(series: &[Series]) -> String {
    let (w, h) = (900.0f64, 480.0f64);
    let (left, right, top, bottom) = (80.0, 20.0, 50.0, 70.0);
    let mut sizes: Vec<usize> = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    let y_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(1.0f64, f64::max)
        * 1.15;
    let plot_w = w - left - right;
    let plot_h = h - top - bottom;
    let group_w = plot_w / sizes.len().max(1) as f64;
    let bar_w = (group_w * 0.8) / series.len().max(1) as f64;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" text-anchor="middle" font-size="16">RFC 2544 zero-loss forwarding rate by frame size</text>"#,
        w / 2.0
    );
    // Y axis with 5 gridlines.
    for i in 0..=5 {
        let v = y_max * f64::from(i) / 5.0;
        let y = top + plot_h - plot_h * f64::from(i) / 5.0;
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{:.0}k</text>"##,
            w - right,
            left - 6.0,
            y + 4.0,
            v / 1000.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text transform="translate(18,{:.1}) rotate(-90)" text-anchor="middle">zero-loss frames/s</text>"#,
        top + plot_h / 2.0
    );
    for (gi, size) in sizes.iter().enumerate() {
        let gx = left + group_w * gi as f64 + group_w * 0.1;
        for (si, ser) in series.iter().enumerate() {
            let Some(&(_, fps, max)) = ser.points.iter().find(|p| p.0 == *size) else {
                continue;
            };
            let bh = plot_h * fps / y_max;
            let x = gx + bar_w * si as f64;
            let y = top + plot_h - bh;
            let _ = writeln!(
                s,
                r#"<rect x="{x:.1}" y="{y:.1}" width="{:.1}" height="{bh:.1}" fill="{}"><title>{} {size} B: {fps:.0} fps</title></rect>"#,
                bar_w * 0.95,
                COLOURS[si % COLOURS.len()],
                esc(&ser.label)
            );
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{:.1}" text-anchor="middle" font-size="10">{:.0}%</text>"#,
                x + bar_w * 0.47,
                y - 4.0,
                100.0 * fps / max.max(1.0)
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{size}</text>"#,
            left + group_w * (gi as f64 + 0.5),
            top + plot_h + 18.0
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">frame size (bytes, FCS included); % = of the generator's maximum rate</text>"#,
        left + plot_w / 2.0,
        h - 28.0
    );
    for (si, ser) in series.iter().enumerate() {
        let x = left + 10.0 + 170.0 * si as f64;
        let _ = writeln!(
            s,
            r#"<rect x="{x:.1}" y="{:.1}" width="12" height="12" fill="{}"/><text x="{:.1}" y="{:.1}">{}</text>"#,
            h - 16.0,
            COLOURS[si % COLOURS.len()],
            x + 16.0,
            h - 6.0,
            esc(&ser.label)
        );
    }
    s.push_str("</svg>\n");
    s
}
