//! An incremental Server-Sent Events parser (the WHATWG event-stream rules): bytes in, events
//! out, across arbitrary chunk boundaries. Comments, `retry`, unknown fields and events with empty
//! data (the priming events streamable HTTP servers may send) are consumed without dispatch.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Event {
    /// The `event` field; "message" when the stream gave none.
    pub event: String,
    /// The `data` lines joined with '\n'.
    pub data: String,
    /// The last `id` seen on the stream, if any.
    pub id: Option<String>,
}

/// Parser state; feed it chunks as they arrive.
#[derive(Debug, Default)]
pub struct Parser {
    line: Vec<u8>,
    /// A '\r' ended the previous chunk: a '\n' starting the next one belongs to it.
    after_cr: bool,
    data: String,
    has_data: bool,
    event: String,
    last_id: Option<String>,
    /// Bytes buffered for one line are capped, so a hostile stream cannot exhaust memory.
    max_line: usize,
}

/// A line longer than the parser accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("an SSE line is longer than {0} bytes")]
pub struct LineTooLong(pub usize);

impl Parser {
    pub fn new() -> Self {
        Parser { max_line: 64 << 20, ..Default::default() }
    }

    /// Feeds a chunk; returns the events it completed.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<Event>, LineTooLong> {
        let mut out = Vec::new();
        let mut rest = chunk;
        if self.after_cr {
            self.after_cr = false;
            if let Some(b'\n') = rest.first() {
                rest = &rest[1..];
            }
        }
        while let Some(pos) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            self.line.extend_from_slice(&rest[..pos]);
            if rest[pos] == b'\r' {
                match rest.get(pos + 1) {
                    Some(b'\n') => rest = &rest[pos + 2..],
                    Some(_) => rest = &rest[pos + 1..],
                    None => {
                        self.after_cr = true;
                        rest = &[];
                    }
                }
            } else {
                rest = &rest[pos + 1..];
            }
            let line = std::mem::take(&mut self.line);
            if let Some(ev) = self.process_line(&line) {
                out.push(ev);
            }
        }
        self.line.extend_from_slice(rest);
        if self.line.len() > self.max_line {
            self.line.clear();
            return Err(LineTooLong(self.max_line));
        }
        Ok(out)
    }

    fn process_line(&mut self, line: &[u8]) -> Option<Event> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line[0] == b':' {
            return None;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &b""[..]),
        };
        let value = String::from_utf8_lossy(value);
        match field {
            b"event" => self.event = value.into_owned(),
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&value);
                self.has_data = true;
            }
            b"id" if !value.contains('\0') => self.last_id = Some(value.into_owned()),
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<Event> {
        let event = std::mem::take(&mut self.event);
        let has_data = std::mem::replace(&mut self.has_data, false);
        let data = std::mem::take(&mut self.data);
        if !has_data || data.is_empty() {
            return None;
        }
        Some(Event {
            event: if event.is_empty() { "message".into() } else { event },
            data,
            id: self.last_id.clone(),
        })
    }
}

/// Parses a complete stream (a body already read to its end).
pub fn parse_all(body: &[u8]) -> Result<Vec<Event>, LineTooLong> {
    let mut p = Parser::new();
    let mut events = p.feed(body)?;
    // A final event without its blank line is not dispatched (the spec): the stream was cut.
    events.extend(p.feed(b"")?);
    Ok(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all_splits(stream: &[u8]) -> Vec<Vec<Event>> {
        (0..=stream.len())
            .map(|cut| {
                let mut p = Parser::new();
                let mut ev = p.feed(&stream[..cut]).unwrap();
                ev.extend(p.feed(&stream[cut..]).unwrap());
                ev
            })
            .collect()
    }

    #[test]
    fn endpoint_and_message_events_across_every_split() {
        let s = b"event: endpoint\r\ndata: /messages/?session_id=abc\r\n\r\n: ping\n\nevent: message\ndata: {\"a\":\ndata: 1}\n\n";
        for ev in all_splits(s) {
            assert_eq!(ev.len(), 2);
            assert_eq!(ev[0].event, "endpoint");
            assert_eq!(ev[0].data, "/messages/?session_id=abc");
            assert_eq!(ev[1].event, "message");
            assert_eq!(ev[1].data, "{\"a\":\n1}");
        }
    }

    #[test]
    fn priming_events_with_empty_data_are_skipped_but_keep_their_id() {
        let ev = parse_all(b"id: 0\ndata:\n\nid: 1\ndata: {\"x\":1}\n\n").unwrap();
        assert_eq!(
            ev,
            vec![Event { event: "message".into(), data: "{\"x\":1}".into(), id: Some("1".into()) }]
        );
        let ev = parse_all(b"id: 7\n\ndata: x\n\n").unwrap();
        assert_eq!(ev[0].id.as_deref(), Some("7"));
    }

    #[test]
    fn lone_cr_line_endings_and_no_space_after_colon() {
        let ev = parse_all(b"event:complete\rdata:[1]\r\r").unwrap();
        assert_eq!(ev, vec![Event { event: "complete".into(), data: "[1]".into(), id: None }]);
    }

    #[test]
    fn an_unterminated_event_is_not_dispatched() {
        assert!(parse_all(b"data: half").unwrap().is_empty());
    }
}
