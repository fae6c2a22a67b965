//! Unit tests of `services::mock`: parsing, errors at their field, matching and answers.

use super::*;

/// The reproduced benchmark's `mock-api/mockserver.json`.
const BENCHMARK: &str = r#"[{"httpRequest": {"method": "GET", "path": "/api"},
  "httpResponse": {"statusCode": 200, "headers": {"Content-Type": ["application/json"]},
                   "body": "{\"status\":\"ok\",\"message\":\"Mock API response\",\"data\":{\"id\":1,\"name\":\"benchmark-test\"}}"}}]"#;

fn error(text: &str) -> String {
    parse(text).expect_err("refused").to_string()
}

fn route<'a>(e: &'a Expectations, method: &str, uri: &str, headers: &[(&str, &str)]) -> Route<'a> {
    let mut h = HeaderMap::new();
    for (n, v) in headers {
        h.append(HeaderName::from_bytes(n.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
    }
    e.route(&Method::from_bytes(method.as_bytes()).unwrap(), &uri.parse().unwrap(), &h)
}

fn index(r: Route) -> Option<usize> {
    match r {
        Route::Expectation(i, _) => Some(i),
        _ => None,
    }
}

#[test]
fn the_benchmarks_file_parses_as_written() {
    let e = parse(BENCHMARK).unwrap();
    assert_eq!(e.sha256, crate::hash::sha256_hex(BENCHMARK.as_bytes()));
    let r = &e.list[0];
    assert_eq!((r.request.method.clone(), r.request.path.as_str()), (Some(Method::GET), "/api"));
    assert_eq!(r.response.status, StatusCode::OK);
    assert_eq!(r.response.headers, [(CONTENT_TYPE, HeaderValue::from_static("application/json"))]);
    let body: serde_json::Value = serde_json::from_slice(&r.response.body).unwrap();
    assert_eq!(body["data"]["name"], "benchmark-test");
    assert_eq!(r.response.delay, Duration::ZERO);
    // One object is one expectation.
    assert_eq!(parse(r#"{"httpRequest": {"path": "/"}, "httpResponse": {}}"#).unwrap().list.len(), 1);
}

#[test]
fn bodies_in_every_form_and_delays_in_every_unit() {
    let e = parse(
        r#"[{"httpRequest": {"path": "/a"}, "httpResponse": {"body": {"b": [1, 2], "a": null}}},
            {"httpRequest": {"path": "/b"}, "httpResponse": {"body": {"type": "JSON", "json": {"z": 1, "y": 2}}}},
            {"httpRequest": {"path": "/c"}, "httpResponse": {"body": {"type": "JSON", "json": "{\"x\":1}", "contentType": "application/json"}}},
            {"httpRequest": {"path": "/d"}, "httpResponse": {"body": {"type": "STRING", "string": "plain"}, "delay": {"timeUnit": "SECONDS", "value": 2}}},
            {"httpRequest": {"path": "/e"}, "httpResponse": {"body": [1,2], "statusCode": 503, "headers": {"x-a": "one", "X-B": ["1", "2"]}, "delay": {"value": 7, "timeUnit": "MICROSECONDS"}}}]"#,
    )
    .unwrap();
    let bodies: Vec<&[u8]> = e.list.iter().map(|x| &x.response.body[..]).collect();
    // JSON values are served as their text in the file: its key order, not a sorted one.
    assert_eq!(
        bodies,
        [&b"{\"b\": [1, 2], \"a\": null}"[..], b"{\"z\": 1, \"y\": 2}", b"{\"x\":1}", b"plain", b"[1,2]"]
    );
    assert_eq!(e.list[2].response.headers, [(CONTENT_TYPE, HeaderValue::from_static("application/json"))]);
    assert_eq!(e.list[3].response.delay, Duration::from_secs(2));
    let last = &e.list[4].response;
    assert_eq!((last.status.as_u16(), last.delay), (503, Duration::from_micros(7)));
    let headers: Vec<(&str, &[u8])> = last.headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes())).collect();
    assert_eq!(headers, [("x-a", &b"one"[..]), ("x-b", b"1"), ("x-b", b"2")]);
    let ms = |unit: &str| {
        let text = format!(
            r#"{{"httpRequest": {{"path": "/"}}, "httpResponse": {{"delay": {{"timeUnit": "{unit}", "value": 3}}}}}}"#
        );
        parse(&text).unwrap().list[0].response.delay
    };
    assert_eq!(ms("NANOSECONDS"), Duration::from_nanos(3));
    assert_eq!(ms("MILLISECONDS"), Duration::from_millis(3));
    assert_eq!(ms("MINUTES"), Duration::from_secs(180));
    assert_eq!(ms("HOURS"), Duration::from_secs(3 * 3600));
    assert_eq!(ms("DAYS"), Duration::from_secs(3 * 86400));
}

#[test]
fn errors_name_the_expectation_and_the_field() {
    let at = |resp: &str| {
        error(&format!(
            r#"[{{"httpRequest": {{"path": "/"}}, "httpResponse": {{}}}}, {{"httpRequest": {{"path": "/"}}, "httpResponse": {resp}}}]"#
        ))
    };
    assert_eq!(
        at(r#"{"statusCode": "200"}"#),
        "expectations[1].httpResponse.statusCode: expected a number, found a string"
    );
    assert_eq!(
        at(r#"{"statusCode": 99}"#),
        "expectations[1].httpResponse.statusCode: 99 is not an HTTP status (100 to 599)"
    );
    assert_eq!(
        at(r#"{"statusCode": 2.5}"#),
        "expectations[1].httpResponse.statusCode: expected a whole number ≥ 0, found 2.5"
    );
    assert!(at(r#"{"statuscode": 200}"#).starts_with("expectations[1].httpResponse.statuscode: not a field the lab's mock knows here (it knows statusCode, headers, body, delay)"));
    assert_eq!(
        at(r#"{"delay": {"timeUnit": "MILLIS", "value": 1}}"#).split(':').next(),
        Some("expectations[1].httpResponse.delay.timeUnit")
    );
    assert_eq!(at(r#"{"delay": {"timeUnit": "SECONDS"}}"#), "expectations[1].httpResponse.delay: no value");
    assert_eq!(
        at(r#"{"delay": {"timeUnit": "DAYS", "value": 1e30}}"#),
        "expectations[1].httpResponse.delay.value: expected a whole number ≥ 0, found 1e30"
    );
    assert_eq!(
        at(r#"{"delay": {"timeUnit": "DAYS", "value": 18446744073709551615}}"#),
        "expectations[1].httpResponse.delay: too long a delay"
    );
    assert_eq!(
        at(r#"{"headers": {"content-length": "3"}}"#),
        "expectations[1].httpResponse.headers.content-length: the service sets it from the body"
    );
    assert_eq!(
        at(r#"{"headers": {"x": [1]}}"#),
        "expectations[1].httpResponse.headers.x[0]: expected a string, found a number"
    );
    assert_eq!(
        at(r#"{"headers": {"x": "a\nb"}}"#),
        "expectations[1].httpResponse.headers.x[0]: not a header value"
    );
    assert_eq!(
        at(r#"{"headers": {"X": "1", "x": "2"}}"#),
        "expectations[1].httpResponse.headers.x: given twice"
    );
    assert_eq!(
        at(r#"{"body": {"type": "XML", "xml": "<a/>"}}"#).split(':').next(),
        Some("expectations[1].httpResponse.body.type")
    );
    assert_eq!(
        at(r#"{"body": {"type": "JSON"}}"#),
        "expectations[1].httpResponse.body: a JSON body without `json`"
    );
    assert!(at(r#"{"body": {"type": "STRING", "string": "x", "charset": "utf-8"}}"#)
        .starts_with("expectations[1].httpResponse.body.charset: not a field"));
    assert_eq!(
        at(
            r#"{"body": {"type": "STRING", "string": "x", "contentType": "text/plain"}, "headers": {"Content-Type": "text/html"}}"#
        ),
        "expectations[1].httpResponse.body.contentType: a content-type in headers too: say it once"
    );
    assert_eq!(
        at(r#"{"statusCode": 200, "statusCode": 201}"#),
        "expectations[1].httpResponse.statusCode: given twice"
    );
    assert_eq!(at("[]"), "expectations[1].httpResponse: expected an object, found an array");
    let req = |r: &str| error(&format!(r#"{{"httpRequest": {r}, "httpResponse": {{}}}}"#));
    assert_eq!(
        req(r#"{"method": "get", "path": "/"}"#),
        "expectations[0].httpRequest.method: \"get\": a method in capitals, such as \"GET\""
    );
    assert_eq!(
        req(r#"{"method": "GET"}"#),
        "expectations[0].httpRequest: no path (the lab's mock matches a path exactly)"
    );
    assert_eq!(
        req(r#"{"path": "api"}"#),
        "expectations[0].httpRequest.path: \"api\" does not start with '/'"
    );
    assert_eq!(
        req(r#"{"path": "/a?b=1"}"#),
        "expectations[0].httpRequest.path: \"/a?b=1\": a query goes in queryStringParameters"
    );
    assert!(req(r#"{"path": "/items/.*"}"#).contains("regular expression"));
    assert!(req(r#"{"path": "/", "secure": true}"#)
        .starts_with("expectations[0].httpRequest.secure: not a field"));
    assert_eq!(
        req(r#"{"path": "/", "queryStringParameters": {"q": "x"}}"#),
        "expectations[0].httpRequest.queryStringParameters.q: expected a list of strings, found a string"
    );
    assert_eq!(
        req(r#"{"path": "/", "headers": {"bad header": []}}"#),
        "expectations[0].httpRequest.headers.bad header: not a header name"
    );
    assert!(req(r#"{"path": "/mockserver/status"}"#).contains("the service's own status route"));
    assert!(parse(r#"{"httpRequest": {"path": "/mockserver/status", "method": "GET"}, "httpResponse": {}}"#)
        .is_ok());
    assert_eq!(error(r#"{"httpResponse": {}}"#), "expectations[0]: no httpRequest");
    assert_eq!(error(r#"[{"httpRequest": {"path": "/"}}]"#), "expectations[0]: no httpResponse");
    assert!(error(r#"[{"httpRequest": {"path": "/"}, "httpResponse": {}, "httpForward": {}}]"#)
        .starts_with("expectations[0].httpForward: not a field"));
    assert_eq!(error("[]"), "expectations: an empty list: every request would be answered 404");
    assert_eq!(
        error("3"),
        "expectations: expected a list of expectations or one expectation object, found a number"
    );
    assert_eq!(error("[1]"), "expectations[0]: expected an object, found a number");
    assert!(error("[{").starts_with("not JSON: "), "{}", error("[{"));
}

#[test]
fn mockservers_defaults_are_accepted_and_nothing_else() {
    let ok = r#"{"id": "x1", "priority": 0, "times": {"unlimited": true}, "timeToLive": {"unlimited": true},
                 "httpRequest": {"path": "/"}, "httpResponse": {}}"#;
    assert!(parse(ok).is_ok());
    let with = |f: &str| error(&format!(r#"{{{f}, "httpRequest": {{"path": "/"}}, "httpResponse": {{}}}}"#));
    assert!(with(r#""priority": 5"#).starts_with("expectations[0].priority: only 0"));
    assert!(with(r#""times": {"remainingTimes": 1}"#)
        .starts_with("expectations[0].times.remainingTimes: not a field"));
    assert!(with(r#""times": {"unlimited": false}"#)
        .starts_with("expectations[0].times: only {\"unlimited\": true}"));
    assert!(with(r#""timeToLive": {}"#).starts_with("expectations[0].timeToLive: only"));
    assert_eq!(with(r#""id": 3"#), "expectations[0].id: expected a string, found a number");
}

#[test]
fn the_first_matching_expectation_answers() {
    let e = parse(
        r#"[{"httpRequest": {"method": "POST", "path": "/api"}, "httpResponse": {"statusCode": 201}},
            {"httpRequest": {"path": "/api", "queryStringParameters": {"q": ["a b", "c"]}}, "httpResponse": {}},
            {"httpRequest": {"path": "/api", "headers": {"X-Token": ["t1"], "accept": []}}, "httpResponse": {}},
            {"httpRequest": {"method": "GET", "path": "/api"}, "httpResponse": {}},
            {"httpRequest": {"path": "/api"}, "httpResponse": {}}]"#,
    )
    .unwrap();
    assert_eq!(index(route(&e, "POST", "/api", &[])), Some(0));
    assert_eq!(index(route(&e, "GET", "/api?q=a+b&q=c&other=1", &[])), Some(1));
    assert_eq!(index(route(&e, "GET", "/api?q=a%20b", &[])), Some(3), "every listed value must be there");
    let both = [("x-token", "t0"), ("X-TOKEN", "t1"), ("Accept", "*/*")];
    assert_eq!(index(route(&e, "GET", "/api", &both)), Some(2), "names in any case, any of the values");
    assert_eq!(index(route(&e, "GET", "/api", &both[..2])), Some(3), "an empty list asks for the header");
    assert_eq!(index(route(&e, "DELETE", "/api", &[])), Some(4));
    assert_eq!(route(&e, "GET", "/api/", &[]), Route::NoMatch, "paths are exact");
    assert_eq!(route(&e, "GET", "/API", &[]), Route::NoMatch);
    assert_eq!(route(&e, "PUT", STATUS_PATH, &[]), Route::Status);
}

#[test]
fn answers_carry_the_expectation_and_a_miss_names_the_request() {
    let e = parse(BENCHMARK).unwrap();
    let (r, delay) = answer(&e, 1080, &Method::GET, &"/api".parse().unwrap(), &HeaderMap::new());
    assert_eq!((r.status(), delay), (StatusCode::OK, Duration::ZERO));
    assert_eq!(r.headers().get(CONTENT_TYPE).unwrap(), "application/json");
    let (miss, _) = answer(&e, 1080, &Method::POST, &"/nope?x=1".parse().unwrap(), &HeaderMap::new());
    assert_eq!(miss.status(), StatusCode::NOT_FOUND);
    let body = futures_body(miss);
    assert_eq!(
        body,
        serde_json::json!({"error": "no expectation matches", "method": "POST", "path": "/nope"})
    );
    let (status, _) = answer(&e, 1080, &Method::PUT, &STATUS_PATH.parse().unwrap(), &HeaderMap::new());
    assert_eq!(
        futures_body(status),
        serde_json::json!({"ports": [1080], "expectations": 1, "expectations_sha256": e.sha256})
    );
}

fn futures_body(r: Response<Full<Bytes>>) -> serde_json::Value {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let bytes = rt.block_on(r.into_body().collect()).unwrap().to_bytes();
    serde_json::from_slice(&bytes).unwrap()
}
