//! How figures read to people: durations in the unit that suits them, bytes in MiB, ratios as
//! percentages, intervals in the unit of their estimate, rates, error rates, cores and counts, and
//! any figure in its `Unit`. Machine formats (CSV, Bencher JSON) do not use these.

use crate::stats::Interval;

use super::rows::Unit;

/// The unit, factor from ms and decimals a duration in ms reads best in (as [`ms`] writes it).
fn duration_unit(x: f64) -> (&'static str, f64, usize) {
    if x < 1.0 {
        ("µs", 1000.0, 1)
    } else if x < 100.0 {
        ("ms", 1.0, 2)
    } else {
        ("ms", 1.0, 0)
    }
}

/// `42.1 µs`, `1.23 ms`, `861 ms`, or `—`.
pub fn ms(v: Option<f64>) -> String {
    match v {
        None => "—".into(),
        Some(x) if !x.is_finite() => "—".into(),
        Some(x) if x < 1.0 => format!("{:.1} µs", x * 1000.0),
        Some(x) if x < 100.0 => format!("{x:.2} ms"),
        Some(x) => format!("{x:.0} ms"),
    }
}

/// An interval in the unit and precision its estimate reads in: `64.26–68.25 ms`, or `—`.
pub fn ms_interval(i: Option<&Interval>) -> String {
    match i {
        Some(i) if i.is_finite() => {
            let (unit, f, d) = duration_unit(i.estimate);
            format!("{:.d$}–{:.d$} {unit}", i.lower * f, i.upper * f)
        }
        _ => "—".into(),
    }
}

/// `3.0 MiB`, or `—`.
pub fn mib(v: Option<u64>) -> String {
    v.map_or("—".into(), |b| format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0)))
}

/// `12.3%`, or `—`.
pub fn percent(v: Option<f64>) -> String {
    v.map_or("—".into(), |x| format!("{:.1}%", x * 100.0))
}

/// The first 12 characters of a hash, for tables where the full one does not fit.
pub fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

/// A rate in req/s: `14,385`, `933.0`, `2.50`.
pub fn rate_number(x: f64) -> String {
    if !x.is_finite() {
        "—".into()
    } else if x >= 1000.0 {
        thousands(x.round() as u64)
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// `10,000`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// An error rate, always shown: `0 %` when nothing failed, `0.012 %`, `3.40 %`.
pub fn error_rate_text(rate: Option<f64>) -> String {
    match rate {
        None => "—".into(),
        Some(x) if !x.is_finite() => "—".into(),
        Some(0.0) => "0 %".into(),
        Some(x) if x < 0.001 => format!("{:.3} %", x * 100.0),
        Some(x) => format!("{:.2} %", x * 100.0),
    }
}

/// `0.76`, or `—`.
pub fn cores_text(v: Option<f64>) -> String {
    v.filter(|x| x.is_finite()).map_or("—".into(), |x| format!("{x:.2}"))
}

/// A figure in its unit, for people.
pub(super) fn unit_text(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Ms => ms(Some(v)),
        Unit::Bytes => mib(Some(v as u64)),
        Unit::Rps => format!("{} req/s", rate_number(v)),
        Unit::Ratio => error_rate_text(Some(v)),
        Unit::Cores => format!("{} cores", cores_text(Some(v))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_in_the_right_unit() {
        assert_eq!(ms(Some(0.0421)), "42.1 µs");
        assert_eq!(ms(Some(1.234)), "1.23 ms");
        assert_eq!(ms(Some(861.4)), "861 ms");
        assert_eq!(ms(None), "—");
        assert_eq!(ms(Some(f64::NAN)), "—");
        assert_eq!(mib(Some(3 * 1024 * 1024)), "3.0 MiB");
        assert_eq!(percent(Some(0.1234)), "12.3%");
    }

    #[test]
    fn intervals_read_in_the_unit_of_their_estimate() {
        let i = |estimate, lower, upper| Interval { estimate, lower, upper, confidence: 0.95 };
        assert_eq!(ms_interval(Some(&i(66.5, 64.261, 68.251))), "64.26–68.25 ms");
        assert_eq!(ms_interval(Some(&i(0.1038, 0.10261, 0.1049))), "102.6–104.9 µs");
        assert_eq!(ms_interval(Some(&i(489.0, 450.0, 520.4))), "450–520 ms");
        assert_eq!(ms_interval(None), "—");
        assert_eq!(short("0123456789abcdef"), "0123456789ab");
    }
}
