//! How every report names what ran, and what it leaves to the server's word: the SDK label from
//! the lab's own facts (a recipe's family and version, or a user's own program built from its
//! source, labelled as such and never as an SDK), and the servers' `serverInfo` claims, shown
//! apart and marked as claimed. Pure: records in, text out.

use crate::record::claimed::claim_text;
use crate::record::Record;

/// The family of a server built from its own source (`recipe::SOURCE_FAMILY`; spelled here so
/// the renderers need no recipe code).
const OWN_PROGRAM_FAMILY: &str = "source";

/// The "sdk" a report shows for a server: `<family> <version>` for a recipe's server, and
/// `own program (source <tree>)` for one built from the user's own source (its `version` is the
/// fetched tree's hash prefix): such a program is the user's, whatever SDK it uses inside.
pub fn sdk_label(family: &str, sdk_version: &str) -> String {
    match family {
        OWN_PROGRAM_FAMILY => format!("own program (source {sdk_version})"),
        _ => format!("{family} {sdk_version}"),
    }
}

/// One server's claim about itself, as the records keep it.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub server: String,
    /// `name version` from its `serverInfo` (distinct texts of its records, joined by " / ").
    pub claimed: String,
    /// The `serverInfo` was over the size limit and cut (its size in bytes).
    pub truncated: Option<u64>,
}

/// The heading of the claims section, the same in every format.
pub const CLAIMS_HEADING: &str = "Servers' claims";
/// What the claims section says of itself.
pub const CLAIMS_NOTE: &str = "What each server says about itself in its initialize result \
(serverInfo), as claimed: the server writes it, the lab checks none of it; the sdk column is \
the lab's own record of what ran.";

/// Every server's claim, in the order servers first appear; servers that claimed nothing are
/// left out.
pub fn claims(records: &[Record]) -> Vec<Claim> {
    let mut out: Vec<Claim> = Vec::new();
    for r in records {
        let Some(info) = r.observed.server_info.as_deref() else { continue };
        let Some(text) = claim_text(info) else { continue };
        let server = &r.cell.server.id;
        match out.iter_mut().find(|c| &c.server == server) {
            Some(c) => {
                if !c.claimed.split(" / ").any(|t| t == text) {
                    c.claimed = format!("{} / {text}", c.claimed);
                }
                c.truncated = c.truncated.or(r.observed.server_info_truncated);
            }
            None => out.push(Claim {
                server: server.clone(),
                claimed: text,
                truncated: r.observed.server_info_truncated,
            }),
        }
    }
    out
}

/// A claim as one line of text: `"pulse 1.0.0" (claimed)`, with the cut said.
pub fn claim_line(c: &Claim) -> String {
    match c.truncated {
        Some(bytes) => format!(
            "\"{}\" (claimed; its serverInfo of {bytes} bytes was cut to name and version)",
            c.claimed
        ),
        None => format!("\"{}\" (claimed)", c.claimed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::sample_record;
    use serde_json::json;
    use std::sync::Arc;

    #[test]
    fn an_own_program_is_never_labelled_as_an_sdk() {
        assert_eq!(sdk_label("python-mcp", "1.1.2"), "python-mcp 1.1.2");
        assert_eq!(sdk_label("source", "10112bd9aa5e"), "own program (source 10112bd9aa5e)");
    }

    #[test]
    fn claims_are_per_server_distinct_and_say_when_cut() {
        let mut a = sample_record("a");
        a.observed.server_info = Some(Arc::new(json!({"name": "rmcp", "version": "0.1"})));
        let mut a2 = a.clone();
        a2.observed.server_info = Some(Arc::new(json!({"name": "evil"})));
        a2.observed.server_info_truncated = Some(9000);
        let mut b = sample_record("b");
        b.observed.server_info = None;
        let c = claims(&[a.clone(), a.clone(), a2, b]);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].claimed, "rmcp 0.1 / evil");
        assert!(claim_line(&c[0]).contains("9000 bytes was cut"), "{}", claim_line(&c[0]));
        assert_eq!(claim_line(&claims(&[a])[0]), "\"rmcp 0.1\" (claimed)");
    }

    #[test]
    fn every_format_labels_an_own_program_and_shows_claims_as_claimed() {
        let mut r = sample_record("mine");
        r.cell.server.family = "source".into();
        r.cell.server.sdk_version = "10112bd9aa5e".into();
        // The program calls itself an SDK: that stays its claim.
        r.observed.server_info = Some(Arc::new(json!({"name": "rmcp", "version": "9.9.9"})));
        r.observed.server_info_truncated = Some(5000);
        for format in
            [super::super::Format::Markdown, super::super::Format::Html, super::super::Format::Table]
        {
            let text = super::super::render(format, std::slice::from_ref(&r));
            assert!(text.contains("own program (source 10112bd9aa5e)"), "{format:?}: {text}");
            assert!(!text.contains("source 10112bd9aa5e |"), "{format:?}");
            assert!(
                text.contains("rmcp 9.9.9&quot; (claimed") || text.contains("rmcp 9.9.9\" (claimed"),
                "{format:?}: {text}"
            );
            assert!(text.contains("5000 bytes was cut"), "{format:?}");
        }
    }
}
