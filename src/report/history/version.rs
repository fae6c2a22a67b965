//! The order of SDK versions in a history: semver-ish, pre-releases before their release,
//! post-releases after it. Text in, ordering out; nothing about records.

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Tok {
    Num(u64),
    Text(String),
}

fn tokens(s: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut digits = false;
    let flush = |cur: &mut String, digits: bool, out: &mut Vec<Tok>| {
        if !cur.is_empty() {
            out.push(if digits {
                Tok::Num(cur.parse().unwrap_or(u64::MAX))
            } else {
                Tok::Text(cur.to_ascii_lowercase())
            });
            cur.clear();
        }
    };
    for c in s.chars() {
        let is_digit = c.is_ascii_digit();
        if !c.is_ascii_alphanumeric() || is_digit != digits {
            flush(&mut cur, digits, &mut out);
        }
        if c.is_ascii_alphanumeric() {
            digits = is_digit;
            cur.push(c);
        }
    }
    flush(&mut cur, digits, &mut out);
    out
}

/// Splits `v1.10.0-rc.1+build` into the release numbers `[1, 10, 0]`, the tag tokens and whether
/// the tag is a post-release.
fn parse_version(v: &str) -> (Vec<u64>, Vec<Tok>, bool) {
    let v = v.trim();
    let v = v.strip_prefix(['v', 'V']).unwrap_or(v);
    let v = v.split('+').next().unwrap_or(v);
    let mut release = Vec::new();
    let mut rest = v;
    loop {
        let end = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        release.push(rest[..end].parse().unwrap_or(u64::MAX));
        rest = &rest[end..];
        match rest.strip_prefix('.') {
            Some(r) if r.starts_with(|c: char| c.is_ascii_digit()) => rest = r,
            _ => break,
        }
    }
    while release.last() == Some(&0) && release.len() > 1 {
        release.pop();
    }
    let tag = tokens(rest);
    let post = matches!(tag.first(), Some(Tok::Text(t)) if t == "post" || t == "r" || t == "rev");
    (release, tag, post)
}

/// Semver-ish order: release numbers numerically (1.9.0 < 1.10.0, 1.2 = 1.2.0), a pre-release tag
/// (`-rc.1`, `rc1`, `b2`, `.dev0`) before its release, a post-release (`.post1`) after it; tags
/// compare token by token, numbers numerically; build metadata (`+...`) and a leading `v` are
/// ignored, and the text itself breaks ties.
pub fn compare_versions(a: &str, b: &str) -> std::cmp::Ordering {
    let (ra, ta, pa) = parse_version(a);
    let (rb, tb, pb) = parse_version(b);
    let rank = |t: &[Tok], post: bool| match (t.is_empty(), post) {
        (true, _) => 1,
        (false, true) => 2,
        (false, false) => 0,
    };
    ra.cmp(&rb)
        .then_with(|| rank(&ta, pa).cmp(&rank(&tb, pb)))
        .then_with(|| {
            // Tokens: numbers before text (semver), numbers numerically; `dev` before
            // `a`/`alpha` before `b`/`beta` before `rc`, as PEP 440 and semver read them; other
            // text by its letters.
            let key = |t: &Tok| match t {
                Tok::Num(n) => (0u8, *n, String::new()),
                Tok::Text(s) => {
                    let order = match s.as_str() {
                        "dev" => 0,
                        "a" | "alpha" => 1,
                        "b" | "beta" => 2,
                        "c" | "pre" | "preview" | "rc" => 3,
                        _ => 4,
                    };
                    (1, order, s.clone())
                }
            };
            let ka: Vec<_> = ta.iter().map(key).collect();
            let kb: Vec<_> = tb.iter().map(key).collect();
            ka.cmp(&kb)
        })
        .then_with(|| a.cmp(b))
}
