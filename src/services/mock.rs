//! The lab's mock HTTP service (`benchlab service-mock`): canned answers, each after its delay,
//! from a file of MockServer-style expectations. It owns the file's format (a subset of
//! MockServer's, below), its parsing into typed errors that name the expectation and the field,
//! the matching and the answers; not where the file comes from or when the service runs (the
//! scenario and the backend do).
//!
//! The file is a JSON array of expectations, or one expectation object:
//! `{"httpRequest": {...}, "httpResponse": {...}}`. Each field is documented on the type it
//! becomes ([`RequestMatcher`], [`CannedResponse`]). A request is answered by the first
//! expectation that matches it; none matching is a 404 with a JSON body naming its method and
//! path. Beside the expectations the service answers MockServer's own `PUT /mockserver/status`
//! (`{"ports": [..], "expectations": n, "expectations_sha256": ".."}`: the lab's readiness probe
//! and its check that the service holds the file the record names); an expectation that would
//! shadow it is refused.
//!
//! Every field this mock does not know is refused, as a scenario's unknown keys are: a typo must
//! never silently change what is served. No MockServer field is ignored; four of an expectation's
//! are accepted only with the value under which MockServer behaves as this mock does: `id` (any
//! string: a label), `priority` (0), `times` and `timeToLive` (`{"unlimited": true}`).
//! MockServer also reads `path` as a regular expression; this mock compares it exactly, and
//! refuses a path holding `* + ? [ ( { | ^ $ \` rather than match it differently. Header and
//! query values are compared exactly too.

use std::cell::Cell;
use std::fmt;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use hyper::{HeaderMap, Method, Response, StatusCode, Uri};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;

/// MockServer's status route, answered by the service itself.
pub const STATUS_PATH: &str = "/mockserver/status";

/// A parsed expectations file.
#[derive(Debug, Clone, PartialEq)]
pub struct Expectations {
    /// In the file's order: the first that matches a request answers it.
    pub list: Vec<Expectation>,
    /// sha256 of the file's bytes (what a record keeps of them).
    pub sha256: String,
}

/// One expectation: what it matches and what it answers.
#[derive(Debug, Clone, PartialEq)]
pub struct Expectation {
    /// `httpRequest` (required).
    pub request: RequestMatcher,
    /// `httpResponse` (required).
    pub response: CannedResponse,
}

/// `httpRequest`: what a request must be for its expectation to answer it.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestMatcher {
    /// `method`: the request's method exactly, in capitals (`"GET"`); any method when absent.
    pub method: Option<Method>,
    /// `path` (required): the request's path exactly, without its query (`"/api"`).
    pub path: String,
    /// `queryStringParameters`: name → a list of values, each of which the request's query must
    /// hold under that name (percent-decoded, `+` a space); other parameters may be there too.
    pub query: Vec<(String, Vec<String>)>,
    /// `headers`: name (any case) → a list of values, each of which the request must carry in a
    /// header of that name; an empty list asks only that the header be there. Other headers may
    /// be there too.
    pub headers: Vec<(HeaderName, Vec<String>)>,
}

/// `httpResponse`: what its expectation answers.
#[derive(Debug, Clone, PartialEq)]
pub struct CannedResponse {
    /// `statusCode`: 100 to 599; 200 when absent.
    pub status: StatusCode,
    /// `headers`: name → a list of values, or one string; each value is a header line of its
    /// own, in the file's order. `content-length` and `transfer-encoding` are the service's
    /// (from the body) and refused here. Nothing else is added but hyper's `date`.
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// `body`: a string is served as it is; `{"type": "STRING", "string": ".."}` likewise;
    /// `{"type": "JSON", "json": ..}` serves a string `json` as it is and any other JSON value as
    /// its text in the file; any other JSON value (an object without `type`, an array, a number)
    /// is served as its text in the file. The typed forms may name a `contentType`, served as
    /// the `content-type` header (refused beside a `content-type` in `headers`). Absent: empty.
    pub body: Bytes,
    /// `delay`: `{"timeUnit": "MILLISECONDS", "value": 250}` (units `NANOSECONDS` to `DAYS`, as
    /// Java's `TimeUnit`); waited before the answer, on its connection only. None when absent.
    pub delay: Duration,
}

/// Why an expectations file cannot be used: not JSON, or a field (at its path, such as
/// `expectations[0].httpResponse.statusCode`) that is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpectationsError {
    #[error("not JSON: {0}")]
    Json(String),
    #[error("{at}: {message}")]
    Field { at: String, message: String },
}

type Error = ExpectationsError;

fn field_error(at: &str, message: impl Into<String>) -> Error {
    Error::Field { at: at.to_string(), message: message.into() }
}

/// An object's fields in the file's order, each value's text as written.
struct Fields<'a>(Vec<(String, &'a RawValue)>);

impl<'de> Deserialize<'de> for Fields<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Fields<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<'de>, A::Error> {
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry::<String, &'de RawValue>()? {
                    out.push(entry);
                }
                Ok(Fields(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// What a JSON value is, for messages.
fn kind(raw: &RawValue) -> &'static str {
    match raw.get().as_bytes().first() {
        Some(b'"') => "a string",
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b't' | b'f') => "a boolean",
        Some(b'n') => "null",
        _ => "a number",
    }
}

/// The fields of the object at `at` as written, refusing a name given twice (`any_case`: in any
/// case, as header names).
fn fields<'a>(raw: &'a RawValue, at: &str, any_case: bool) -> Result<Vec<(String, &'a RawValue)>, Error> {
    if !raw.get().starts_with('{') {
        return Err(field_error(at, format!("expected an object, found {}", kind(raw))));
    }
    let Fields(fields) = serde_json::from_str(raw.get()).map_err(|e| field_error(at, e.to_string()))?;
    let same = |a: &str, b: &str| if any_case { a.eq_ignore_ascii_case(b) } else { a == b };
    for (i, (name, _)) in fields.iter().enumerate() {
        if fields[..i].iter().any(|(n, _)| same(n, name)) {
            return Err(field_error(&format!("{at}.{name}"), "given twice"));
        }
    }
    Ok(fields)
}

/// The fields of the object at `at` (each name, its path, its value), refusing one given twice
/// and any not in `known`.
fn object<'a>(
    raw: &'a RawValue,
    at: &str,
    known: &[&str],
) -> Result<Vec<(String, String, &'a RawValue)>, Error> {
    let fields = fields(raw, at, false)?;
    if let Some((name, _)) = fields.iter().find(|(n, _)| !known.contains(&n.as_str())) {
        return Err(field_error(
            &format!("{at}.{name}"),
            format!("not a field the lab's mock knows here (it knows {})", known.join(", ")),
        ));
    }
    Ok(fields.into_iter().map(|(name, v)| (name.clone(), format!("{at}.{name}"), v)).collect())
}

fn string(raw: &RawValue, at: &str) -> Result<String, Error> {
    serde_json::from_str(raw.get())
        .map_err(|_| field_error(at, format!("expected a string, found {}", kind(raw))))
}

fn whole_number(raw: &RawValue, at: &str) -> Result<u64, Error> {
    if kind(raw) != "a number" {
        return Err(field_error(at, format!("expected a number, found {}", kind(raw))));
    }
    serde_json::from_str(raw.get())
        .map_err(|_| field_error(at, format!("expected a whole number ≥ 0, found {}", raw.get())))
}

fn strings(raw: &RawValue, at: &str) -> Result<Vec<String>, Error> {
    let items: Vec<&RawValue> = match raw.get().starts_with('[') {
        true => serde_json::from_str(raw.get()).map_err(|e| field_error(at, e.to_string()))?,
        false => return Err(field_error(at, format!("expected a list of strings, found {}", kind(raw)))),
    };
    items.iter().enumerate().map(|(i, v)| string(v, &format!("{at}[{i}]"))).collect()
}

/// Parses an expectations file's text.
pub fn parse(text: &str) -> Result<Expectations, Error> {
    let top: &RawValue = serde_json::from_str(text).map_err(|e| Error::Json(e.to_string()))?;
    let items: Vec<&RawValue> = match top.get().as_bytes().first() {
        Some(b'[') => serde_json::from_str(top.get()).map_err(|e| Error::Json(e.to_string()))?,
        Some(b'{') => vec![top],
        _ => {
            return Err(field_error(
                "expectations",
                format!("expected a list of expectations or one expectation object, found {}", kind(top)),
            ))
        }
    };
    if items.is_empty() {
        return Err(field_error("expectations", "an empty list: every request would be answered 404"));
    }
    let list = items
        .iter()
        .enumerate()
        .map(|(i, raw)| expectation(raw, &format!("expectations[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Expectations { list, sha256: crate::hash::sha256_hex(text.as_bytes()) })
}

fn expectation(raw: &RawValue, at: &str) -> Result<Expectation, Error> {
    let (mut request, mut response) = (None, None);
    for (name, here, v) in
        object(raw, at, &["httpRequest", "httpResponse", "id", "priority", "times", "timeToLive"])?
    {
        match name.as_str() {
            "httpRequest" => request = Some(request_matcher(v, &here)?),
            "httpResponse" => response = Some(canned_response(v, &here)?),
            "id" => drop(string(v, &here)?),
            "priority" if v.get() != "0" => {
                return Err(field_error(&here, "only 0: the lab's mock answers by the file's order"))
            }
            "times" | "timeToLive" => {
                let unlimited = object(v, &here, &["unlimited"])?;
                if unlimited.len() != 1 || unlimited[0].2.get() != "true" {
                    return Err(field_error(
                        &here,
                        "only {\"unlimited\": true}: the lab's mock answers every matching request",
                    ));
                }
            }
            _ => {}
        }
    }
    let request = request.ok_or_else(|| field_error(at, "no httpRequest"))?;
    let response = response.ok_or_else(|| field_error(at, "no httpResponse"))?;
    if request.path == STATUS_PATH && request.method.as_ref().is_none_or(|m| m == Method::PUT) {
        return Err(field_error(
            &format!("{at}.httpRequest.path"),
            format!("PUT {STATUS_PATH} is the service's own status route, as MockServer's is"),
        ));
    }
    Ok(Expectation { request, response })
}

fn request_matcher(raw: &RawValue, at: &str) -> Result<RequestMatcher, Error> {
    let mut m = RequestMatcher { method: None, path: String::new(), query: Vec::new(), headers: Vec::new() };
    let mut path = None;
    for (name, here, v) in object(raw, at, &["method", "path", "queryStringParameters", "headers"])? {
        match name.as_str() {
            "method" => {
                let s = string(v, &here)?;
                let token =
                    !s.is_empty() && s.bytes().all(|b| b.is_ascii_uppercase() || b == b'-' || b == b'_');
                if !token {
                    return Err(field_error(&here, format!("{s:?}: a method in capitals, such as \"GET\"")));
                }
                m.method =
                    Some(Method::from_bytes(s.as_bytes()).map_err(|e| field_error(&here, e.to_string()))?);
            }
            "path" => path = Some(request_path(v, &here)?),
            "queryStringParameters" => {
                for (param, values) in fields(v, &here, true)? {
                    m.query.push((param.clone(), strings(values, &format!("{here}.{param}"))?));
                }
            }
            "headers" => {
                for (header, values) in fields(v, &here, true)? {
                    let at_header = format!("{here}.{header}");
                    let name = HeaderName::from_bytes(header.as_bytes())
                        .map_err(|_| field_error(&at_header, "not a header name"))?;
                    m.headers.push((name, strings(values, &at_header)?));
                }
            }
            _ => {}
        }
    }
    m.path = path.ok_or_else(|| field_error(at, "no path (the lab's mock matches a path exactly)"))?;
    Ok(m)
}

fn request_path(raw: &RawValue, at: &str) -> Result<String, Error> {
    let path = string(raw, at)?;
    if !path.starts_with('/') {
        return Err(field_error(at, format!("{path:?} does not start with '/'")));
    }
    if path.contains('?') {
        return Err(field_error(at, format!("{path:?}: a query goes in queryStringParameters")));
    }
    if let Some(c) = path.chars().find(|c| "*+[({|^$\\".contains(*c)) {
        return Err(field_error(
            at,
            format!("{path:?} holds {c:?}: MockServer would read it as a regular expression, the lab's mock compares paths exactly"),
        ));
    }
    Ok(path)
}

fn canned_response(raw: &RawValue, at: &str) -> Result<CannedResponse, Error> {
    let mut r = CannedResponse {
        status: StatusCode::OK,
        headers: Vec::new(),
        body: Bytes::new(),
        delay: Duration::ZERO,
    };
    let mut content_type = None;
    for (name, here, v) in object(raw, at, &["statusCode", "headers", "body", "delay"])? {
        match name.as_str() {
            "statusCode" => {
                let n = whole_number(v, &here)?;
                r.status = u16::try_from(n)
                    .ok()
                    .filter(|n| (100..=599).contains(n))
                    .and_then(|n| StatusCode::from_u16(n).ok())
                    .ok_or_else(|| field_error(&here, format!("{n} is not an HTTP status (100 to 599)")))?;
            }
            "headers" => r.headers = response_headers(v, &here)?,
            "body" => (r.body, content_type) = body(v, &here)?,
            "delay" => r.delay = delay(v, &here)?,
            _ => {}
        }
    }
    if let Some(ct) = content_type {
        if r.headers.iter().any(|(n, _)| n == CONTENT_TYPE) {
            return Err(field_error(
                &format!("{at}.body.contentType"),
                "a content-type in headers too: say it once",
            ));
        }
        let value = HeaderValue::from_str(&ct)
            .map_err(|_| field_error(&format!("{at}.body.contentType"), "not a header value"))?;
        r.headers.push((CONTENT_TYPE, value));
    }
    Ok(r)
}

fn response_headers(raw: &RawValue, at: &str) -> Result<Vec<(HeaderName, HeaderValue)>, Error> {
    let mut out = Vec::new();
    for (header, values) in fields(raw, at, true)? {
        let here = format!("{at}.{header}");
        let name =
            HeaderName::from_bytes(header.as_bytes()).map_err(|_| field_error(&here, "not a header name"))?;
        if name == hyper::header::CONTENT_LENGTH || name == hyper::header::TRANSFER_ENCODING {
            return Err(field_error(&here, "the service sets it from the body"));
        }
        let values = match values.get().starts_with('"') {
            true => vec![string(values, &here)?],
            false => strings(values, &here)?,
        };
        for (i, v) in values.iter().enumerate() {
            let value = HeaderValue::from_str(v)
                .map_err(|_| field_error(&format!("{here}[{i}]"), "not a header value"))?;
            out.push((name.clone(), value));
        }
    }
    Ok(out)
}

/// A body's bytes and the `contentType` its typed form names.
fn body(raw: &RawValue, at: &str) -> Result<(Bytes, Option<String>), Error> {
    if raw.get().starts_with('"') {
        return Ok((Bytes::from(string(raw, at)?), None));
    }
    let typed = match raw.get().starts_with('{') {
        true => {
            let Fields(fields) =
                serde_json::from_str(raw.get()).map_err(|e| field_error(at, e.to_string()))?;
            fields
                .iter()
                .find(|(n, _)| n == "type")
                .map(|(_, t)| string(t, &format!("{at}.type")))
                .transpose()?
        }
        false => None,
    };
    let Some(typed) = typed else {
        return Ok((Bytes::copy_from_slice(raw.get().as_bytes()), None));
    };
    let (value_field, fields) = match typed.as_str() {
        "JSON" => ("json", object(raw, at, &["type", "json", "contentType"])?),
        "STRING" => ("string", object(raw, at, &["type", "string", "contentType"])?),
        other => {
            return Err(field_error(
                &format!("{at}.type"),
                format!("{other:?}: the lab's mock serves \"JSON\" and \"STRING\" bodies (a JSON body with a field `type` of its own goes in {{\"type\": \"JSON\", \"json\": ..}})"),
            ))
        }
    };
    let (mut bytes, mut content_type) = (None, None);
    for (name, here, v) in fields {
        match name.as_str() {
            "contentType" => content_type = Some(string(v, &here)?),
            "string" => bytes = Some(Bytes::from(string(v, &here)?)),
            "json" if v.get().starts_with('"') => bytes = Some(Bytes::from(string(v, &here)?)),
            "json" => bytes = Some(Bytes::copy_from_slice(v.get().as_bytes())),
            _ => {}
        }
    }
    let bytes = bytes.ok_or_else(|| field_error(at, format!("a {typed} body without `{value_field}`")))?;
    Ok((bytes, content_type))
}

fn delay(raw: &RawValue, at: &str) -> Result<Duration, Error> {
    let (mut unit, mut value) = (None, None);
    for (name, here, v) in object(raw, at, &["timeUnit", "value"])? {
        match name.as_str() {
            "timeUnit" => {
                let u = string(v, &here)?;
                let nanos: u64 = match u.as_str() {
                    "NANOSECONDS" => 1,
                    "MICROSECONDS" => 1_000,
                    "MILLISECONDS" => 1_000_000,
                    "SECONDS" => 1_000_000_000,
                    "MINUTES" => 60_000_000_000,
                    "HOURS" => 3_600_000_000_000,
                    "DAYS" => 86_400_000_000_000,
                    _ => return Err(field_error(&here, format!("{u:?} is not a unit (NANOSECONDS, MICROSECONDS, MILLISECONDS, SECONDS, MINUTES, HOURS, DAYS)"))),
                };
                unit = Some(nanos);
            }
            "value" => value = Some(whole_number(v, &here)?),
            _ => {}
        }
    }
    let unit = unit.ok_or_else(|| field_error(at, "no timeUnit"))?;
    let value = value.ok_or_else(|| field_error(at, "no value"))?;
    let nanos = value.checked_mul(unit).ok_or_else(|| field_error(at, "too long a delay"))?;
    Ok(Duration::from_nanos(nanos))
}

/// What answers a request.
#[derive(Debug, PartialEq)]
pub enum Route<'a> {
    /// The first expectation that matches (its index, its response).
    Expectation(usize, &'a CannedResponse),
    /// MockServer's status route.
    Status,
    /// None: a 404.
    NoMatch,
}

impl Expectations {
    /// What answers a request of `method`, `uri` and `headers`.
    pub fn route(&self, method: &Method, uri: &Uri, headers: &HeaderMap) -> Route<'_> {
        if method == Method::PUT && uri.path() == STATUS_PATH {
            return Route::Status;
        }
        let query = query_pairs(uri.query().unwrap_or(""));
        self.list
            .iter()
            .enumerate()
            .find(|(_, e)| e.request.matches(method, uri.path(), &query, headers))
            .map_or(Route::NoMatch, |(i, e)| Route::Expectation(i, &e.response))
    }
}

impl RequestMatcher {
    fn matches(&self, method: &Method, path: &str, query: &[(String, String)], headers: &HeaderMap) -> bool {
        self.method.as_ref().is_none_or(|m| m == method)
            && self.path == path
            && self.query.iter().all(|(name, values)| {
                values.iter().all(|v| query.iter().any(|(n, qv)| n == name && qv == v))
                    && (!values.is_empty() || query.iter().any(|(n, _)| n == name))
            })
            && self.headers.iter().all(|(name, values)| {
                let got: Vec<&[u8]> = headers.get_all(name).iter().map(HeaderValue::as_bytes).collect();
                !got.is_empty() && values.iter().all(|v| got.contains(&v.as_bytes()))
            })
    }
}

/// A query string's pairs, percent-decoded; a pair that does not decode is left out (no
/// expectation can name it).
fn query_pairs(query: &str) -> Vec<(String, String)> {
    use super::api::percent_decode;
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .filter_map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            Some((percent_decode(k).ok()?, percent_decode(v).ok()?))
        })
        .collect()
}

/// The answer to a request, and how long to wait before it.
pub fn answer(
    e: &Expectations,
    port: u16,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
) -> (Response<Full<Bytes>>, Duration) {
    let json = |status: StatusCode, v: serde_json::Value| {
        Response::builder()
            .status(status)
            .header(CONTENT_TYPE, "application/json")
            .body(Full::new(Bytes::from(v.to_string())))
            .expect("a status and a static header are valid")
    };
    match e.route(method, uri, headers) {
        Route::Expectation(_, r) => {
            let mut response = Response::new(Full::new(r.body.clone()));
            *response.status_mut() = r.status;
            for (n, v) in &r.headers {
                response.headers_mut().append(n.clone(), v.clone());
            }
            (response, r.delay)
        }
        Route::Status => (
            json(
                StatusCode::OK,
                serde_json::json!({"ports": [port], "expectations": e.list.len(), "expectations_sha256": e.sha256}),
            ),
            Duration::ZERO,
        ),
        Route::NoMatch => (
            json(
                StatusCode::NOT_FOUND,
                serde_json::json!({"error": "no expectation matches", "method": method.as_str(), "path": uri.path()}),
            ),
            Duration::ZERO,
        ),
    }
}

/// Serves `expectations` on 127.0.0.1:`port` (0: a free one) on one thread until killed;
/// `on_bound` is told the address once it listens. Each answer waits its delay on its own
/// connection's task, so a slow answer holds no other connection.
pub fn serve(
    expectations: Expectations,
    port: u16,
    on_bound: impl FnOnce(std::net::SocketAddr),
) -> std::io::Result<()> {
    let expectations = Rc::new(expectations);
    let bound = Rc::new(Cell::new(port));
    let set = bound.clone();
    super::serve::serve_http(
        port,
        move |addr| {
            set.set(addr.port());
            on_bound(addr)
        },
        move |req| {
            let (expectations, port) = (expectations.clone(), bound.get());
            async move {
                let (parts, body) = req.into_parts();
                // Read whole (and dropped), so the connection can carry the next request.
                let _ = body.collect().await;
                let (response, delay) =
                    answer(&expectations, port, &parts.method, &parts.uri, &parts.headers);
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                response
            }
        },
    )
}

#[cfg(test)]
#[path = "mock_tests.rs"]
mod tests;
