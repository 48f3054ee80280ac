//! The two charts the benchmarks need, drawn with plotters' SVG backend: grouped bars (a value
//! per category and series) and labelled points (speed against ratio). plotters is built
//! without fonts (no `ttf` feature): SVG text is laid out by the viewer, so nothing on the
//! system is needed.

use anyhow::anyhow;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// The dashboard's series colours, so that the plots and the page look alike.
const COLOURS: [RGBColor; 8] = [
    RGBColor(0x25, 0x63, 0xeb),
    RGBColor(0xdc, 0x26, 0x26),
    RGBColor(0x16, 0xa3, 0x4a),
    RGBColor(0xd9, 0x77, 0x06),
    RGBColor(0x7c, 0x3a, 0xed),
    RGBColor(0x08, 0x91, 0xb2),
    RGBColor(0xdb, 0x27, 0x77),
    RGBColor(0x4b, 0x55, 0x63),
];

/// One series of a bar chart: its name and a value per category (`None`: no bar).
pub struct Bars {
    /// The legend's name.
    pub name: String,
    /// One value per category.
    pub values: Vec<Option<f64>>,
}

/// One series of a scatter chart: its name and its points `(x, y, label)`.
pub struct Points {
    /// The legend's name.
    pub name: String,
    /// The points, joined by a line in the order given.
    pub points: Vec<(f64, f64, String)>,
}

/// The SVG drawing area, its title drawn.
pub type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Renders `draw` into an SVG document of `size` pixels.
pub fn svg(
    size: (u32, u32),
    draw: impl FnOnce(&Area<'_>) -> anyhow::Result<()>,
) -> anyhow::Result<String> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("plot: {e}"))?;
        draw(&root)?;
        root.present().map_err(|e| anyhow!("plot: {e}"))?;
    }
    Ok(out)
}

/// Grouped bars on `area`: one group per category, one bar per series, the value over it.
pub fn bars(
    area: &Area<'_>,
    title: &str,
    y_label: &str,
    categories: &[String],
    series: &[Bars],
) -> anyhow::Result<()> {
    let top = series
        .iter()
        .flat_map(|s| s.values.iter().flatten())
        .fold(0.0_f64, |a, &b| a.max(b));
    let n = categories.len().max(1) as f64;
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..n, 0.0..(top * 1.15).max(1e-9))
        .map_err(|e| anyhow!("plot: {e}"))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(y_label)
        .draw()
        .map_err(|e| anyhow!("plot: {e}"))?;
    let width = 0.8 / series.len().max(1) as f64;
    for (k, s) in series.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        let bars = s.values.iter().enumerate().filter_map(|(i, v)| {
            let x = i as f64 + 0.1 + width * k as f64;
            v.map(|v| Rectangle::new([(x, 0.0), (x + width * 0.92, v)], colour.filled()))
        });
        chart
            .draw_series(bars)
            .map_err(|e| anyhow!("plot: {e}"))?
            .label(s.name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 10, y + 5)], colour.filled()));
        let numbers = s.values.iter().enumerate().filter_map(|(i, v)| {
            let x = i as f64 + 0.1 + width * (k as f64 + 0.46);
            v.map(|v| {
                let style =
                    TextStyle::from(("sans-serif", 11)).pos(Pos::new(HPos::Center, VPos::Bottom));
                Text::new(short(v), (x, v), style)
            })
        });
        chart
            .draw_series(numbers)
            .map_err(|e| anyhow!("plot: {e}"))?;
    }
    // Category names under the axis, centred on their group.
    let style = TextStyle::from(("sans-serif", 12)).pos(Pos::new(HPos::Center, VPos::Top));
    for (i, name) in categories.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        let (ox, oy) = area.get_base_pixel();
        area.draw(&Text::new(
            name.as_str(),
            (x - ox, y - oy + 6),
            style.clone(),
        ))
        .map_err(|e| anyhow!("plot: {e}"))?;
    }
    if series.len() > 1 {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.3))
            .draw()
            .map_err(|e| anyhow!("plot: {e}"))?;
    }
    Ok(())
}

/// Labelled points, one colour and line per series, on `area`.
pub fn points(
    area: &Area<'_>,
    title: &str,
    (x_label, y_label): (&str, &str),
    series: &[Points],
) -> anyhow::Result<()> {
    let all = || series.iter().flat_map(|s| s.points.iter());
    let (x_max, y_min, y_max) = all().fold((0.0_f64, f64::MAX, 0.0_f64), |(x, lo, hi), p| {
        (x.max(p.0), lo.min(p.1), hi.max(p.1))
    });
    let y_min = if y_min == f64::MAX { 0.0 } else { y_min };
    let pad = ((y_max - y_min) * 0.1).max(0.05);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..(x_max * 1.15).max(1e-9), (y_min - pad)..(y_max + pad))
        .map_err(|e| anyhow!("plot: {e}"))?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .draw()
        .map_err(|e| anyhow!("plot: {e}"))?;
    for (k, s) in series.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        let line = s.points.iter().map(|p| (p.0, p.1));
        chart
            .draw_series(LineSeries::new(line, colour.stroke_width(2)))
            .map_err(|e| anyhow!("plot: {e}"))?
            .label(s.name.as_str())
            .legend(move |(x, y)| Circle::new((x + 5, y), 4, colour.filled()));
        let marks = s.points.iter().map(|(x, y, label)| {
            EmptyElement::at((*x, *y))
                + Circle::new((0, 0), 4, colour.filled())
                + Text::new(label.clone(), (6, -14), ("sans-serif", 11))
        });
        chart.draw_series(marks).map_err(|e| anyhow!("plot: {e}"))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()
        .map_err(|e| anyhow!("plot: {e}"))?;
    Ok(())
}

/// A value as a bar's label: whole numbers from 100 up, else three significant digits.
fn short(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}
