//! Answers already checked, recognised again byte for byte: a load sends the same few calls over
//! and over, and a correct server answers each the same way with only the JSON-RPC id changed.
//! After an answer has been parsed and found correct, its body is kept as the bytes before and
//! after its id; a later body that is exactly those bytes around the later request's id is the
//! same correct answer, and needs no JSON parse. Any other body is parsed and checked in full.

/// A checked answer's body, split around its JSON-RPC id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KnownAnswer {
    sse: bool,
    before: Vec<u8>,
    after: Vec<u8>,
}

impl KnownAnswer {
    /// Keeps a body that was found to be the correct answer to request `id`, if its id can be
    /// told apart: exactly one `"id":` (blanks allowed around the colon) followed by `id`'s
    /// digits and no further digit. A body with none or several is not kept (and is parsed
    /// every time).
    pub fn learn(body: &[u8], sse: bool, id: u64) -> Option<KnownAnswer> {
        let decimal = crate::http1::Decimal::new(id);
        let digits = decimal.as_bytes();
        let mut found = None;
        let key = b"\"id\"";
        let mut from = 0;
        while let Some(i) = find(&body[from..], key) {
            let mut j = from + i + key.len();
            while body.get(j).is_some_and(|b| b.is_ascii_whitespace()) {
                j += 1;
            }
            if body.get(j) == Some(&b':') {
                j += 1;
                while body.get(j).is_some_and(|b| b.is_ascii_whitespace()) {
                    j += 1;
                }
                let end = j + digits.len();
                if body.get(j..end) == Some(digits) && !body.get(end).is_some_and(u8::is_ascii_digit) {
                    if found.is_some() {
                        return None;
                    }
                    found = Some((j, end));
                }
            }
            from += i + key.len();
        }
        let (start, end) = found?;
        Some(KnownAnswer { sse, before: body[..start].to_vec(), after: body[end..].to_vec() })
    }

    /// Whether `body` is this answer to request `id`.
    pub fn matches(&self, body: &[u8], sse: bool, id: u64) -> bool {
        let decimal = crate::http1::Decimal::new(id);
        let digits = decimal.as_bytes();
        sse == self.sse
            && body.len() == self.before.len() + digits.len() + self.after.len()
            && body.starts_with(&self.before)
            && body.ends_with(&self.after)
            && &body[self.before.len()..self.before.len() + digits.len()] == digits
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::KnownAnswer;

    #[test]
    fn an_answer_is_recognised_with_any_id_and_nothing_else_is() {
        let body = br#"{"jsonrpc":"2.0","id":17,"result":{"content":[{"type":"text","text":"42"}]}}"#;
        let k = KnownAnswer::learn(body, false, 17).expect("one id");
        assert!(k.matches(body, false, 17));
        let later = br#"{"jsonrpc":"2.0","id":1234,"result":{"content":[{"type":"text","text":"42"}]}}"#;
        assert!(k.matches(later, false, 1234));
        assert!(!k.matches(later, false, 1235), "another request's id");
        assert!(!k.matches(later, true, 1234), "the same bytes as an SSE body");
        let wrong = br#"{"jsonrpc":"2.0","id":1234,"result":{"content":[{"type":"text","text":"43"}]}}"#;
        assert!(!k.matches(wrong, false, 1234));
        let shifted = br#"{"jsonrpc":"2.0","id":123,"result":{"content":[{"type":"text","text":"442"}]}}"#;
        assert!(!k.matches(shifted, false, 123));
    }

    #[test]
    fn blanks_and_sse_framing_are_kept_and_an_ambiguous_id_is_not_learned() {
        let sse = b"event: message\ndata: {\"id\" : 9, \"jsonrpc\":\"2.0\",\"result\":{}}\n\n";
        let k = KnownAnswer::learn(sse, true, 9).expect("one id");
        assert!(k.matches(
            b"event: message\ndata: {\"id\" : 10, \"jsonrpc\":\"2.0\",\"result\":{}}\n\n",
            true,
            10
        ));
        // The result carries an "id" equal to the request's: which one is the JSON-RPC id cannot
        // be told from the bytes, so the answer is parsed every time.
        assert_eq!(KnownAnswer::learn(br#"{"id":5,"result":{"id":5}}"#, false, 5), None);
        assert!(KnownAnswer::learn(br#"{"id":5,"result":{"id":55}}"#, false, 5).is_some());
        assert_eq!(KnownAnswer::learn(br#"{"id":"5","result":{}}"#, false, 5), None);
    }
}
