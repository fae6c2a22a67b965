//! Reading and writing what people read: positions in a file (line and column from a byte
//! offset), `*` patterns, durations and memory sizes with units, and RFC 3339 times. Pure
//! functions (but `now_rfc3339`, which reads the clock).

/// Matches `text` against a pattern whose `*` matches any run of characters.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first)
        || !text[first.len()..].ends_with(last)
        || text.len() < first.len() + last.len()
    {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

/// Parses `"10s"`, `"500ms"`, `"2m"`, `"1.5s"`, `"24h"` into milliseconds (at most a day).
pub fn parse_duration_ms(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| format!("duration {s:?}: expected a number with ms, s, m or h"))?;
    let mult = match unit.trim() {
        "ms" => 1.0,
        "s" => 1e3,
        "m" | "min" => 60e3,
        "h" => 3_600e3,
        other => return Err(format!("duration {s:?}: unknown unit {other:?} (use ms, s, m or h)")),
    };
    let ms = n * mult;
    if !ms.is_finite() || !(0.0..=86_400e3).contains(&ms) {
        return Err(format!("duration {s:?} is out of range"));
    }
    Ok(ms.round() as u64)
}

/// A duration flag's value (`--duration 10s`, `--call-timeout 500ms`): every duration flag takes
/// the scenario's syntax (`500ms`, `5s`, `2m`). A bare number is the old spelling, seconds, kept
/// for one release: `bare` says so, for the CLI's deprecation notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurationArg {
    pub ms: u64,
    pub bare: bool,
}

impl DurationArg {
    pub fn secs(secs: u64) -> DurationArg {
        DurationArg { ms: secs * 1000, bare: false }
    }

    pub fn duration(self) -> std::time::Duration {
        std::time::Duration::from_millis(self.ms)
    }

    /// The notice for a bare number given to `flag`, if it was one.
    pub fn deprecation(self, flag: &str) -> Option<String> {
        self.bare.then(|| {
            let secs = self.ms as f64 / 1000.0;
            format!(
                "{flag} {secs}: a bare number of seconds is deprecated; write {secs}s (every duration flag takes 500ms, 5s, 2m)"
            )
        })
    }
}

/// Parses a duration flag: [`parse_duration_ms`]'s syntax, or a bare number of seconds (the old
/// spelling).
pub fn parse_duration_arg(s: &str) -> Result<DurationArg, String> {
    match s.trim().parse::<f64>() {
        Ok(secs) if secs.is_finite() && (0.0..=86_400.0).contains(&secs) => {
            Ok(DurationArg { ms: (secs * 1000.0).round() as u64, bare: true })
        }
        Ok(_) => Err(format!("duration {s:?} is out of range")),
        Err(_) => parse_duration_ms(s).map(|ms| DurationArg { ms, bare: false }),
    }
}

/// Parses `"512MiB"`, `"1GiB"`, `"64KiB"` or a plain number of bytes.
pub fn parse_memory(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let n: u64 = num.parse().map_err(|_| format!("memory {s:?}: expected a number with KiB, MiB or GiB"))?;
    let mult = match unit.trim() {
        "" | "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => return Err(format!("memory {s:?}: unknown unit {other:?} (use KiB, MiB or GiB)")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("memory {s:?} is too large"))
}

/// 1-based line and column of a byte offset.
pub fn line_col(source: &str, offset: usize) -> (usize, usize) {
    let before = &source[..offset.min(source.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map_or(before.chars().count(), |nl| before[nl + 1..].chars().count()) + 1;
    (line, column)
}

/// Now, as RFC 3339 UTC with seconds (no dependency on a calendar crate).
pub fn now_rfc3339() -> String {
    let secs =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    rfc3339(secs)
}

/// Formats Unix seconds as `YYYY-MM-DDTHH:MM:SSZ` (civil-from-days, proleptic Gregorian).
pub fn rfc3339(unix_secs: u64) -> String {
    let days = (unix_secs / 86_400) as i64;
    let rem = unix_secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Three significant digits, plainly.
pub fn three_digits(v: f64) -> String {
    if !v.is_finite() {
        return "∞".into();
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_flag_takes_the_scenario_syntax_and_a_bare_number_as_the_old_seconds() {
        assert_eq!(parse_duration_arg("500ms"), Ok(DurationArg { ms: 500, bare: false }));
        assert_eq!(parse_duration_arg("2m"), Ok(DurationArg { ms: 120_000, bare: false }));
        assert_eq!(parse_duration_arg("0.2"), Ok(DurationArg { ms: 200, bare: true }));
        assert_eq!(
            DurationArg { ms: 200, bare: true }.deprecation("--warmup-secs").unwrap(),
            "--warmup-secs 0.2: a bare number of seconds is deprecated; write 0.2s (every duration flag takes 500ms, 5s, 2m)"
        );
        assert_eq!(DurationArg::secs(3).deprecation("--duration"), None);
        assert!(parse_duration_arg("-1").is_err() && parse_duration_arg("1 parsec").is_err());
    }
}
