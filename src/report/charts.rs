//! SVG charts drawn with plotters' SVG backend into strings, for the HTML report: horizontal
//! bars (with confidence whiskers), lines over workers (log x) and over time (a load's series),
//! latency percentile curves and a
//! metric across SDK versions (categorical x, interval bars, fitted levels and steps marked).
//! Pure: figures in, SVG out. The
//! SVG is meant to be inlined in HTML, so it carries no XML namespace declaration.

use plotters::coord::ranged1d::SegmentValue;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// Chart width in pixels.
const WIDTH: u32 = 860;
const FONT: &str = "sans-serif";

/// Tableau 10: distinct colours that survive colour-blindness reasonably well.
const PALETTE: [RGBColor; 10] = [
    RGBColor(0x4E, 0x79, 0xA7),
    RGBColor(0xF2, 0x8E, 0x2B),
    RGBColor(0xE1, 0x57, 0x59),
    RGBColor(0x76, 0xB7, 0xB2),
    RGBColor(0x59, 0xA1, 0x4F),
    RGBColor(0xED, 0xC9, 0x48),
    RGBColor(0xB0, 0x7A, 0xA1),
    RGBColor(0xFF, 0x9D, 0xA7),
    RGBColor(0x9C, 0x75, 0x5F),
    RGBColor(0xBA, 0xB0, 0xAC),
];

pub type ChartError = Box<dyn std::error::Error>;

/// The legend every line chart draws: upper left, on a translucent white box, labels at `size`.
fn legend<'a, DB, CT>(chart: &mut ChartContext<'a, DB, CT>, size: u32) -> Result<(), ChartError>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    CT: plotters::coord::CoordTranslate,
{
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(0xBB, 0xBB, 0xBB))
        .label_font((FONT, size))
        .draw()?;
    Ok(())
}

/// One bar: a label, its value, an optional interval drawn as a whisker, and the text written at
/// its end.
#[derive(Debug, Clone)]
pub struct Bar {
    pub label: String,
    pub value: f64,
    pub ci: Option<(f64, f64)>,
    pub text: String,
    /// The palette index of the bar; `None` colours bars by their position.
    pub color: Option<usize>,
}

/// One line of a line chart: its label and (x, y) points, in x order.
#[derive(Debug, Clone)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// One curve of a percentile plot: its label and (quantile, ms) points.
#[derive(Debug, Clone)]
pub struct Curve {
    pub label: String,
    /// Samples behind the curve: its last point is drawn at 1/(1−q) = n.
    pub count: u64,
    pub points: Vec<(f64, f64)>,
}

/// The inline form of plotters' SVG: without the namespace attribute (HTML5 puts `<svg>` in the
/// SVG namespace itself), so the page names no URL at all.
fn inline(svg: String) -> String {
    svg.replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1)
}

/// Pixels for the longest label, by the same crude estimate plotters makes for SVG text.
fn label_area(labels: impl Iterator<Item = usize>) -> u32 {
    let longest = labels.max().unwrap_or(0) as u32;
    (longest * 7 + 16).clamp(60, 320)
}

/// Horizontal bars, the first bar at the top, with whiskers where an interval is given.
pub fn bars(title: &str, axis: &str, bars: &[Bar]) -> Result<String, ChartError> {
    let n = bars.len();
    if n == 0 {
        return Err("nothing to draw".into());
    }
    let height = 90 + 34 * n as u32;
    let max = bars
        .iter()
        .map(|b| b.ci.map_or(b.value, |(_, hi)| hi.max(b.value)))
        .filter(|v| v.is_finite())
        .fold(0.0, f64::max);
    // Room on the right for the value text.
    let x_max = if max > 0.0 { max * 1.25 } else { 1.0 };
    // Bar i is drawn in segment n-1-i so that the first bar is at the top.
    let row = |i: usize| n - 1 - i;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(label_area(bars.iter().map(|b| b.label.chars().count())))
            .build_cartesian_2d(0f64..x_max, (0..n - 1).into_segmented())?;
        let y_label = |v: &SegmentValue<usize>| match v {
            SegmentValue::CenterOf(s) if *s < n => bars[row(*s)].label.clone(),
            _ => String::new(),
        };
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(n)
            .y_label_formatter(&y_label)
            .x_label_formatter(&|v| axis_number(*v))
            .x_max_light_lines(1)
            .x_desc(axis)
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .draw()?;
        chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
            let color = PALETTE[b.color.unwrap_or(i) % PALETTE.len()];
            let mut r = Rectangle::new(
                [(0.0, SegmentValue::Exact(row(i))), (b.value, SegmentValue::Exact(row(i) + 1))],
                color.mix(0.85).filled(),
            );
            r.set_margin(5, 5, 0, 0);
            r
        }))?;
        chart.draw_series(bars.iter().enumerate().filter_map(|(i, b)| {
            b.ci.map(|(lo, hi)| {
                ErrorBar::new_horizontal(
                    SegmentValue::CenterOf(row(i)),
                    lo,
                    b.value,
                    hi,
                    BLACK.stroke_width(1),
                    10,
                )
            })
        }))?;
        chart.draw_series(bars.iter().enumerate().map(|(i, b)| {
            let end = b.ci.map_or(b.value, |(_, hi)| hi.max(b.value));
            // Anchored at the bar's (or whisker's) end, 8 px to the right of it.
            EmptyElement::at((end, SegmentValue::CenterOf(row(i))))
                + Text::new(
                    b.text.clone(),
                    (8, 0),
                    TextStyle::from((FONT, 12).into_font()).pos(Pos::new(HPos::Left, VPos::Center)),
                )
        }))?;
        root.present()?;
    }
    Ok(inline(svg))
}

/// An axis figure without needless decimals: `200`, `0.5`, `1.25`.
fn axis_number(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// `50%`, `99.9%`, … for a point at 1/(1−q) = x.
fn percentile_label(x: f64) -> String {
    let p = 100.0 * (1.0 - 1.0 / x);
    let s = format!("{p:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    format!("{s}%")
}

/// The points of a curve on the plot's x axis, 1/(1−q): levels beyond what n samples can
/// resolve (1−q < 1/n) are dropped and the maximum is put at x = n.
fn plot_points(c: &Curve) -> Vec<(f64, f64)> {
    let n = c.count.max(2) as f64;
    let mut pts: Vec<(f64, f64)> = c
        .points
        .iter()
        .filter(|(q, _)| *q < 1.0 && 1.0 / (1.0 - q) < n)
        .map(|&(q, v)| (1.0 / (1.0 - q), v))
        .collect();
    if let Some(&(_, max)) = c.points.last() {
        pts.push((n, max));
    }
    pts
}

/// Latency by percentile: x is 1/(1−q) on a log scale (labelled as percentiles), y is ms on a log
/// scale, one curve per histogram.
pub fn percentiles(title: &str, curves: &[Curve]) -> Result<String, ChartError> {
    let series: Vec<(&Curve, Vec<(f64, f64)>)> =
        curves.iter().map(|c| (c, plot_points(c))).filter(|(_, p)| !p.is_empty()).collect();
    if series.is_empty() {
        return Err("nothing to draw".into());
    }
    let all = series.iter().flat_map(|(_, p)| p.iter());
    let (x_max, y_min, y_max) =
        all.fold((10.0f64, f64::MAX, f64::MIN), |(x, lo, hi), &(px, py)| (x.max(px), lo.min(py), hi.max(py)));
    let (y_min, y_max) = ((y_min * 0.8).max(1e-6), (y_max * 1.25).max(y_min * 2.0));
    let height = 460 + 18 * series.len() as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d((1.0f64..x_max * 1.1).log_scale(), (y_min..y_max).log_scale())?;
        chart
            .configure_mesh()
            .x_label_formatter(&|x| percentile_label(*x))
            .y_label_formatter(&|y| axis_number(*y))
            .x_desc("percentile (scale of 1/(1−q))")
            .y_desc("ms (log scale)")
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .light_line_style(RGBColor(0xEE, 0xEE, 0xEE))
            .draw()?;
        for (i, (c, pts)) in series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            chart
                .draw_series(std::iter::once(PathElement::new(pts.clone(), color.stroke_width(2))))?
                .label(c.label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        }
        legend(&mut chart, 12)?;
        root.present()?;
    }
    Ok(inline(svg))
}

/// Lines over a log-scaled x (workers), one per series, with a marker at every point; y is
/// linear from 0 and its labels are written by `y_label`.
pub fn lines(
    title: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[Series],
    y_label: &dyn Fn(f64) -> String,
) -> Result<String, ChartError> {
    let series: Vec<&Series> = series.iter().filter(|s| !s.points.is_empty()).collect();
    if series.is_empty() {
        return Err("nothing to draw".into());
    }
    let pts = series.iter().flat_map(|s| s.points.iter());
    let (x_min, x_max, y_max) = pts.fold((f64::MAX, f64::MIN, 0.0f64), |(a, b, c), &(x, y)| {
        (a.min(x), b.max(x), if y.is_finite() { c.max(y) } else { c })
    });
    let (x_lo, x_hi) = ((x_min / 1.5).max(0.5), x_max * 1.5);
    let y_hi = if y_max > 0.0 { y_max * 1.15 } else { 1.0 };
    let height = 420 + 18 * series.len() as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(72)
            .build_cartesian_2d((x_lo..x_hi).log_scale(), 0f64..y_hi)?;
        chart
            .configure_mesh()
            .x_label_formatter(&|x| axis_number(*x))
            .y_label_formatter(&|y| y_label(*y))
            .x_desc(x_desc)
            .y_desc(y_desc)
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .light_line_style(RGBColor(0xEE, 0xEE, 0xEE))
            .draw()?;
        for (i, s) in series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let pts: Vec<(f64, f64)> = s.points.iter().copied().filter(|(_, y)| y.is_finite()).collect();
            chart
                .draw_series(std::iter::once(PathElement::new(pts.clone(), color.stroke_width(2))))?
                .label(s.label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
        }
        legend(&mut chart, 12)?;
        root.present()?;
    }
    Ok(inline(svg))
}

/// Lines over time (x linear, seconds), one per series, y linear from 0 labelled by `y_label`;
/// the measured window (`window`, seconds) is shaded, so warm-up or ramp before it and the idle
/// phase after it read as such.
pub fn over_time(
    title: &str,
    y_desc: &str,
    series: &[Series],
    window: (f64, f64),
    y_label: &dyn Fn(f64) -> String,
) -> Result<String, ChartError> {
    let series: Vec<&Series> = series.iter().filter(|s| !s.points.is_empty()).collect();
    if series.is_empty() {
        return Err("nothing to draw".into());
    }
    let pts = series.iter().flat_map(|s| s.points.iter());
    let (x_max, y_max) =
        pts.fold((window.1, 0.0f64), |(a, b), &(x, y)| (a.max(x), if y.is_finite() { b.max(y) } else { b }));
    let y_hi = if y_max > 0.0 { y_max * 1.15 } else { 1.0 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 300)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 16))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(72)
            .build_cartesian_2d(0f64..x_max.max(1.0), 0f64..y_hi)?;
        chart.draw_series(std::iter::once(Rectangle::new(
            [(window.0, 0.0), (window.1, y_hi)],
            RGBColor(0x4E, 0x79, 0xA7).mix(0.07).filled(),
        )))?;
        chart
            .configure_mesh()
            .x_label_formatter(&|x| axis_number(*x))
            .y_label_formatter(&|y| y_label(*y))
            .x_desc("seconds from the load's start (shaded: the measured window)")
            .y_desc(y_desc)
            .label_style((FONT, 11))
            .axis_desc_style((FONT, 12))
            .light_line_style(RGBColor(0xEE, 0xEE, 0xEE))
            .draw()?;
        for (i, s) in series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let pts: Vec<(f64, f64)> = s.points.iter().copied().filter(|(_, y)| y.is_finite()).collect();
            chart
                .draw_series(std::iter::once(PathElement::new(pts, color.stroke_width(2))))?
                .label(s.label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        }
        legend(&mut chart, 11)?;
        root.present()?;
    }
    Ok(inline(svg))
}

/// One version's figure on a version chart, with its interval.
#[derive(Debug, Clone, Copy)]
pub struct VersionPoint {
    pub value: f64,
    pub ci: Option<(f64, f64)>,
}

/// A level of the fitted piecewise-constant model: versions `first..=last` (indexes) at `level`.
#[derive(Debug, Clone, Copy)]
pub struct Level {
    pub first: usize,
    pub last: usize,
    pub level: f64,
}

/// A version where the cells failed: a red cross on the x axis.
#[derive(Debug, Clone, Copy)]
pub struct FailedMark {
    pub index: usize,
}

/// A step to mark between version `index - 1` and `index`, with its text (`▲ +38 %`).
#[derive(Debug, Clone)]
pub struct StepMark {
    pub index: usize,
    pub text: String,
    pub regression: bool,
}

/// One metric across versions: x is categorical (the versions in order, labels turned upright when
/// there are many), y linear from 0 labelled by `y_label`. The values are joined by a line with a
/// marker each and error bars at their intervals; the fitted levels are drawn as grey dashes and
/// each step as a vertical line before its first version, red for a regression and green for an
/// improvement, with its text at the top; a version whose cells failed gets a red cross on the x
/// axis.
#[allow(clippy::too_many_arguments)]
pub fn versions_line(
    title: &str,
    y_desc: &str,
    versions: &[String],
    points: &[Option<VersionPoint>],
    levels: &[Level],
    steps: &[StepMark],
    failed: &[FailedMark],
    y_label: &dyn Fn(f64) -> String,
) -> Result<String, ChartError> {
    let n = versions.len();
    let present: Vec<(f64, VersionPoint)> = points
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.filter(|p| p.value.is_finite()).map(|p| (i as f64, p)))
        .collect();
    if n == 0 || present.is_empty() {
        return Err("nothing to draw".into());
    }
    let y_max = present
        .iter()
        .map(|(_, p)| p.ci.map_or(p.value, |(_, hi)| hi.max(p.value)))
        .filter(|v| v.is_finite())
        .fold(0.0f64, f64::max);
    let y_hi = if y_max > 0.0 { y_max * 1.2 } else { 1.0 };
    let upright = n > 8;
    let longest = versions.iter().map(|v| v.chars().count()).max().unwrap_or(1) as u32;
    let x_area = if upright { (longest * 7 + 24).clamp(44, 160) } else { 44 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (WIDTH, 340 + x_area)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 18))
            .margin(12)
            .x_label_area_size(x_area)
            .y_label_area_size(72)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..y_hi)?;
        // Upright labels are drawn below, by hand: plotters centres a turned label on its tick.
        let x_label = |x: &f64| {
            let i = x.round();
            if !upright && (x - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < n {
                versions[i as usize].clone()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(if upright { n } else { n.min(80) })
            .x_label_formatter(&x_label)
            .y_label_formatter(&|y| y_label(*y))
            .x_desc("SDK version")
            .y_desc(y_desc)
            .label_style((FONT, 12))
            .axis_desc_style((FONT, 13))
            .light_line_style(RGBColor(0xEE, 0xEE, 0xEE))
            .draw()?;
        if upright {
            let style = TextStyle::from((FONT, 11).into_font())
                .transform(FontTransform::Rotate270)
                .pos(Pos::new(HPos::Right, VPos::Center));
            // At most about one label per 13 px; the first version of a step always gets one.
            let every = n.div_ceil(56).max(1);
            let shown = |i: usize| i.is_multiple_of(every) || steps.iter().any(|s| s.index == i);
            for (i, v) in versions.iter().enumerate().filter(|(i, _)| shown(*i)) {
                let (px, py) = chart.backend_coord(&(i as f64, 0.0));
                root.draw(&Text::new(v.clone(), (px, py + 8), style.clone()))?;
            }
        }
        let grey = RGBColor(0x99, 0x99, 0x99);
        chart.draw_series(levels.iter().map(|l| {
            DashedPathElement::new(
                vec![(l.first as f64 - 0.4, l.level), (l.last as f64 + 0.4, l.level)],
                6,
                4,
                grey.stroke_width(2),
            )
        }))?;
        for s in steps.iter().filter(|s| s.index > 0 && s.index < n) {
            let color = if s.regression { PALETTE[2] } else { PALETTE[4] };
            let x = s.index as f64 - 0.5;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(x, 0.0), (x, y_hi)],
                color.stroke_width(2),
            )))?;
            chart.draw_series(std::iter::once(
                EmptyElement::at((x, y_hi))
                    + Text::new(
                        s.text.clone(),
                        (4, 4),
                        TextStyle::from((FONT, 12).into_font())
                            .color(&color)
                            .pos(Pos::new(HPos::Left, VPos::Top)),
                    ),
            ))?;
        }
        let color = PALETTE[0];
        chart.draw_series(present.iter().filter_map(|&(x, p)| {
            p.ci.filter(|(lo, hi)| lo.is_finite() && hi.is_finite())
                .map(|(lo, hi)| ErrorBar::new_vertical(x, lo, p.value, hi, color.stroke_width(1), 8))
        }))?;
        let line: Vec<(f64, f64)> = present.iter().map(|&(x, p)| (x, p.value)).collect();
        chart.draw_series(std::iter::once(PathElement::new(line.clone(), color.stroke_width(2))))?;
        chart.draw_series(
            failed
                .iter()
                .filter(|f| f.index < n)
                .map(|f| Cross::new((f.index as f64, 0.0), 5, PALETTE[2].stroke_width(2))),
        )?;
        let radius = if n > 60 { 2 } else { 3 };
        chart.draw_series(line.iter().map(|&p| Circle::new(p, radius, color.filled())))?;
        root.present()?;
    }
    Ok(inline(svg))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_labels() {
        assert_eq!(axis_number(200.0), "200");
        assert_eq!(axis_number(0.5), "0.5");
        assert_eq!(axis_number(0.001), "0.001");
        assert_eq!(percentile_label(2.0), "50%");
        assert_eq!(percentile_label(10.0), "90%");
        assert_eq!(percentile_label(1000.0), "99.9%");
        assert_eq!(percentile_label(1.0), "0%");
    }

    #[test]
    fn curves_stop_at_what_their_samples_resolve() {
        let c = Curve {
            label: "x".into(),
            count: 100,
            points: vec![(0.0, 1.0), (0.5, 2.0), (0.99, 3.0), (0.995, 4.0), (1.0, 5.0)],
        };
        let p = plot_points(&c);
        assert_eq!(p.first(), Some(&(1.0, 1.0)));
        assert_eq!(p.last(), Some(&(100.0, 5.0)));
        assert!(p.iter().all(|(x, _)| *x <= 100.0));
    }

    #[test]
    fn charts_are_inline_svg_with_escaped_text() {
        let b = [
            Bar { label: "a<b>".into(), value: 3.0, ci: Some((2.0, 4.0)), text: "3 ms".into(), color: None },
            Bar { label: "c&d".into(), value: 1.0, ci: None, text: "1 ms".into(), color: Some(1) },
        ];
        let svg = bars("title", "ms", &b).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{svg}");
        assert!(!svg.contains("http"), "{svg}");
        assert!(svg.contains("a&lt;b&gt;") && svg.contains("c&amp;d") && !svg.contains("<b>"));
        assert!(bars("t", "ms", &[]).is_err());
        let c = Curve { label: "x".into(), count: 1000, points: vec![(0.0, 0.1), (0.5, 0.2), (1.0, 3.0)] };
        let svg = percentiles("p", &[c]).unwrap();
        assert!(svg.starts_with("<svg") && !svg.contains("http"));
        let l = Series { label: "s&t".into(), points: vec![(1.0, 10.0), (10.0, 50.0), (100.0, 40.0)] };
        let svg = lines("w", "workers", "req/s", &[l], &|y| axis_number(y)).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("s&amp;t") && !svg.contains("http"));
        assert!(lines("w", "x", "y", &[], &|y| axis_number(y)).is_err());
    }

    #[test]
    fn version_charts_mark_their_steps() {
        let versions: Vec<String> = (0..12).map(|i| format!("1.{i}.0")).collect();
        let points: Vec<Option<VersionPoint>> = (0..12)
            .map(|i| {
                let v = if i < 6 { 100.0 } else { 140.0 };
                (i != 3).then_some(VersionPoint { value: v, ci: Some((v * 0.95, v * 1.05)) })
            })
            .collect();
        let levels = [Level { first: 0, last: 5, level: 100.0 }, Level { first: 6, last: 11, level: 140.0 }];
        let steps = [StepMark { index: 6, text: "▲ +40 % at 1.6.0".into(), regression: true }];
        let failed = [FailedMark { index: 3 }];
        let svg = versions_line("cold <start>", "ms", &versions, &points, &levels, &steps, &failed, &|y| {
            axis_number(y)
        })
        .unwrap();
        assert!(svg.starts_with("<svg") && !svg.contains("http"), "{svg}");
        assert!(
            svg.contains("1.11.0") && svg.contains("+40 % at 1.6.0") && svg.contains("cold &lt;start&gt;")
        );
        // The y axis description and each of the 12 version labels.
        assert_eq!(svg.matches("rotate(270").count(), 13, "many versions turn their labels upright");
        assert!(versions_line("t", "ms", &versions, &[None; 12], &[], &[], &[], &|y| axis_number(y)).is_err());
    }
}
