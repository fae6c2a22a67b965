//! Python literals as JSON values: Gradio's MCP servers answer a tool's value as `str(value)`
//! (`{'message': 'hi', 'n': 25, 'ok': True}`), not JSON. This reads the literal subset
//! `ast.literal_eval` accepts for such values — dicts, lists, tuples, strings (single, double,
//! escaped), ints, floats, True, False, None — and nothing else.

use serde_json::{Map, Number, Value};

/// Parses a Python literal; `None` when the text is not one (trailing text included).
pub fn parse(text: &str) -> Option<Value> {
    let mut p = P { s: text.as_bytes(), i: 0, depth: 0 };
    let v = p.value()?;
    p.ws();
    (p.i == p.s.len()).then_some(v)
}

struct P<'a> {
    s: &'a [u8],
    i: usize,
    depth: u32,
}

impl P<'_> {
    fn ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        self.ws();
        if self.peek() == Some(b) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self) -> Option<Value> {
        self.ws();
        self.depth += 1;
        if self.depth > 128 {
            return None;
        }
        let v = match self.peek()? {
            b'{' => self.dict(),
            b'[' => self.seq(b'[', b']'),
            b'(' => self.seq(b'(', b')'),
            b'\'' | b'"' => self.string().map(Value::String),
            b'-' | b'+' | b'0'..=b'9' | b'.' => self.number(),
            _ => self.word(),
        };
        self.depth -= 1;
        v
    }

    fn dict(&mut self) -> Option<Value> {
        self.i += 1;
        let mut m = Map::new();
        loop {
            if self.eat(b'}') {
                return Some(Value::Object(m));
            }
            self.ws();
            let key = match self.value()? {
                Value::String(s) => s,
                Value::Number(n) => n.to_string(),
                Value::Bool(b) => if b { "True" } else { "False" }.to_string(),
                _ => return None,
            };
            if !self.eat(b':') {
                return None;
            }
            let v = self.value()?;
            m.insert(key, v);
            if !self.eat(b',') {
                return self.eat(b'}').then_some(Value::Object(m));
            }
        }
    }

    fn seq(&mut self, _open: u8, close: u8) -> Option<Value> {
        self.i += 1;
        let mut a = Vec::new();
        loop {
            if self.eat(close) {
                return Some(Value::Array(a));
            }
            a.push(self.value()?);
            if !self.eat(b',') {
                return self.eat(close).then_some(Value::Array(a));
            }
        }
    }

    fn string(&mut self) -> Option<String> {
        let q = self.s[self.i];
        self.i += 1;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let b = *self.s.get(self.i)?;
            self.i += 1;
            match b {
                _ if b == q => break,
                b'\\' => {
                    let e = *self.s.get(self.i)?;
                    self.i += 1;
                    match e {
                        b'n' => out.push(b'\n'),
                        b't' => out.push(b'\t'),
                        b'r' => out.push(b'\r'),
                        b'0' => out.push(0),
                        b'\\' | b'\'' | b'"' => out.push(e),
                        b'x' | b'u' | b'U' => {
                            let n = match e {
                                b'x' => 2,
                                b'u' => 4,
                                _ => 8,
                            };
                            let hex = std::str::from_utf8(self.s.get(self.i..self.i + n)?).ok()?;
                            self.i += n;
                            let c = char::from_u32(u32::from_str_radix(hex, 16).ok()?)?;
                            let mut buf = [0u8; 4];
                            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                        }
                        _ => {
                            out.push(b'\\');
                            out.push(e);
                        }
                    }
                }
                _ => out.push(b),
            }
        }
        String::from_utf8(out).ok()
    }

    fn number(&mut self) -> Option<Value> {
        let start = self.i;
        while self.i < self.s.len()
            && matches!(self.s[self.i], b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E' | b'_')
        {
            self.i += 1;
        }
        let t: String = std::str::from_utf8(&self.s[start..self.i]).ok()?.replace('_', "");
        if let Ok(n) = t.parse::<i64>() {
            return Some(Value::Number(n.into()));
        }
        t.parse::<f64>().ok().and_then(Number::from_f64).map(Value::Number)
    }

    fn word(&mut self) -> Option<Value> {
        for (w, v) in [("True", Value::Bool(true)), ("False", Value::Bool(false)), ("None", Value::Null)] {
            if self.s[self.i..].starts_with(w.as_bytes()) {
                self.i += w.len();
                return Some(v);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn gradio_values_read_as_json() {
        assert_eq!(
            parse("{'message': 'hello benchmark', 'timestamp_ns': 1796036025302257979}"),
            Some(json!({"message": "hello benchmark", "timestamp_ns": 1796036025302257979u64 as i64}))
        );
        assert_eq!(
            parse(r#"{'a': [1, 2.5, -3e2], "b": (True, False, None), 'c': 'it\'s \u00e9\n'}"#),
            Some(json!({"a": [1, 2.5, -300.0], "b": [true, false, null], "c": "it's é\n"}))
        );
        assert_eq!(parse("{'stats': {'number_sum': 150.0}}"), Some(json!({"stats": {"number_sum": 150.0}})));
        assert_eq!(parse("[]"), Some(json!([])));
    }

    #[test]
    fn anything_else_is_not_a_literal() {
        for bad in ["hello", "{'a': 1", "[1, 2] tail", "{'a' 1}", "os.system('x')", "", "{1: }"] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        assert_eq!(parse(&"[".repeat(1000)), None);
    }
}
