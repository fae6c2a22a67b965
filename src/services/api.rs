//! The lab's API service (`benchlab service-api`): the shop's catalogue and prices over HTTP/1.1
//! on 127.0.0.1, answered from `mcp::shop`'s dataset of a seed. Routes: `GET /health`,
//! `GET /search?q=&limit=`, `GET /items/<id>`, `POST /price`. With `exit_after`, the process exits
//! (code 3) once it has answered that many requests: the fault the lab's tests use to lose a
//! service mid-cell. It does not seed Redis or decide when it runs.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Response, StatusCode};
use serde_json::{json, Value};

use crate::mcp::shop::{self, Dataset};

/// `GET /search`'s limit when none is given, and the most it returns.
pub const DEFAULT_LIMIT: usize = 10;
pub const MAX_LIMIT: usize = 50;
/// The exit code of the `exit@<n>` fault.
pub const FAULT_EXIT_CODE: i32 = 3;

/// The service's data: the dataset and its hash, computed once.
pub struct Catalogue {
    pub dataset: Dataset,
    pub seed_sha256: String,
}

impl Catalogue {
    pub fn new(seed: u64) -> Catalogue {
        let dataset = shop::dataset(seed);
        let seed_sha256 = shop::seed_sha256(&dataset);
        Catalogue { dataset, seed_sha256 }
    }
}

/// Serves on 127.0.0.1:`port` on one thread until killed, or until `exit_after` answers.
pub fn serve(port: u16, seed: u64, exit_after: Option<u64>) -> std::io::Result<()> {
    let catalogue = Rc::new(Catalogue::new(seed));
    let budget = Rc::new(Budget::new(exit_after));
    super::serve::serve_http(
        port,
        |_| {},
        move |req| {
            let (catalogue, budget) = (catalogue.clone(), budget.clone());
            async move { http_answer(&catalogue, &budget, req).await }
        },
    )
}

/// The requests the `exit@<n>` fault still lets through.
pub struct Budget {
    left: Cell<Option<u64>>,
}

impl Budget {
    pub fn new(exit_after: Option<u64>) -> Budget {
        Budget { left: Cell::new(exit_after) }
    }

    /// Whether one more request may be answered; counts it when so.
    pub fn take(&self) -> bool {
        match self.left.get() {
            None => true,
            Some(0) => false,
            Some(n) => {
                self.left.set(Some(n - 1));
                true
            }
        }
    }

    /// Whether the last request allowed has been taken.
    pub fn spent(&self) -> bool {
        self.left.get() == Some(0)
    }
}

fn exit_on_fault() -> ! {
    eprintln!("benchlab service-api: fault exit: exiting after its last allowed answer");
    std::process::exit(FAULT_EXIT_CODE)
}

async fn http_answer(
    catalogue: &Catalogue,
    budget: &Budget,
    req: hyper::Request<hyper::body::Incoming>,
) -> Response<Full<Bytes>> {
    if !budget.take() {
        exit_on_fault();
    }
    let (parts, body) = req.into_parts();
    let (status, value) = match body.collect().await {
        Ok(b) => answer(catalogue, &parts.method, &parts.uri, &b.to_bytes()),
        Err(e) => (400, json!({"error": format!("reading the body: {e}")})),
    };
    if budget.spent() {
        // The answer goes out when this future returns; the exit waits for that write (loopback:
        // at once). Any request arriving meanwhile finds the budget empty and exits unanswered.
        tokio::task::spawn_local(async {
            tokio::time::sleep(Duration::from_millis(5)).await;
            exit_on_fault()
        });
    }
    Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(value.to_string())))
        .expect("static headers are valid")
}

/// The answer to one request: its status and JSON body.
pub fn answer(c: &Catalogue, method: &Method, uri: &hyper::Uri, body: &[u8]) -> (u16, Value) {
    let d = &c.dataset;
    let error = |status: u16, e: String| (status, json!({ "error": e }));
    match (method, uri.path()) {
        (&Method::GET, "/health") => (
            200,
            json!({"ok": true, "seed": d.seed, "seed_sha256": c.seed_sha256, "products": d.products.len()}),
        ),
        (&Method::GET, "/search") => match search_params(uri.query().unwrap_or("")) {
            Ok((q, limit)) => (200, shop::search(d, &q, limit)),
            Err(e) => error(400, e),
        },
        (&Method::GET, path) if path.starts_with("/items/") => {
            let Ok(id) = percent_decode(&path["/items/".len()..]) else {
                return error(400, format!("a bad percent escape in {path:?}"));
            };
            match shop::item(d, &id) {
                Some(v) => (200, v),
                None => error(404, format!("unknown product {id:?}")),
            }
        }
        (&Method::POST, "/price") => match price_items(body).and_then(|items| shop::price(d, &items)) {
            Ok(v) => (200, v),
            Err(e) => error(400, e),
        },
        (m, path) => error(404, format!("no route {m} {path}")),
    }
}

/// `q` (default empty: every product) and `limit` (default 10, at most 50) of a query string.
fn search_params(query: &str) -> Result<(String, usize), String> {
    let (mut q, mut limit) = (String::new(), DEFAULT_LIMIT);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match percent_decode(k)?.as_str() {
            "q" => q = percent_decode(v)?,
            "limit" => {
                let v = percent_decode(v)?;
                limit = v.parse::<usize>().map_err(|_| format!("limit {v:?} is not a whole number"))?;
            }
            _ => {}
        }
    }
    Ok((q, limit.min(MAX_LIMIT)))
}

/// Decodes `%XX` escapes and `+` (a space, as forms encode it) into UTF-8 text.
pub fn percent_decode(s: &str) -> Result<String, String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
                let b = hex
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| format!("a bad percent escape in {s:?}"))?;
                out.push(b);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} does not decode to UTF-8"))
}

/// `POST /price`'s body: `{"items": [{"id": str, "qty": int ≥ 0}, ...]}`.
fn price_items(body: &[u8]) -> Result<Vec<(String, u32)>, String> {
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))?;
    let items = v.get("items").and_then(Value::as_array).ok_or("the body needs an array items")?;
    items
        .iter()
        .map(|it| {
            let id = it.get("id").and_then(Value::as_str).ok_or("every item needs a string id")?;
            let qty = it
                .get("qty")
                .and_then(Value::as_u64)
                .and_then(|q| u32::try_from(q).ok())
                .ok_or("every item needs a whole qty")?;
            Ok((id.to_string(), qty))
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::services::http1::{api_ready, Client};
    use std::time::Instant;

    /// Starts the service on a free port in a thread (it runs until the test process ends).
    pub(crate) fn start(seed: u64) -> u16 {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        std::thread::spawn(move || serve(port, seed, None));
        api_ready(port, Instant::now() + Duration::from_secs(10)).unwrap();
        port
    }

    #[test]
    fn serves_every_route_as_mcp_shop_answers() {
        let port = start(7);
        let d = shop::dataset(7);
        let mut c = Client::new(&format!("127.0.0.1:{port}"), Duration::from_secs(5));
        let (status, health) = c.get("/health").unwrap();
        assert_eq!(status, 200);
        assert_eq!(
            health,
            json!({"ok": true, "seed": 7, "seed_sha256": shop::seed_sha256(&d), "products": 120})
        );
        let noun = d.products[0].name.split(' ').nth(1).unwrap().to_string();
        assert_eq!(c.get(&format!("/search?q={noun}&limit=2")).unwrap(), (200, shop::search(&d, &noun, 2)));
        let name = &d.products[3].name;
        let q = name.replace(' ', "%20");
        assert_eq!(c.get(&format!("/search?limit=50&q={q}")).unwrap(), (200, shop::search(&d, name, 50)));
        assert_eq!(
            c.get(&format!("/search?q={}", name.replace(' ', "+"))).unwrap().1,
            shop::search(&d, name, 10)
        );
        assert_eq!(c.get("/search?q=GARDEN&limit=500").unwrap().1, shop::search(&d, "garden", 50));
        assert_eq!(c.get("/search").unwrap().1, shop::search(&d, "", 10));
        assert_eq!(c.get("/search?q=%ZZ").unwrap().0, 400);
        assert_eq!(c.get("/search?limit=-1").unwrap().0, 400);
        assert_eq!(c.get("/items/p042").unwrap(), (200, shop::item(&d, "p042").unwrap()));
        assert_eq!(c.get("/items/p%30%342").unwrap(), (200, shop::item(&d, "p042").unwrap()));
        let (status, e) = c.get("/items/p999").unwrap();
        assert_eq!(status, 404);
        assert!(e["error"].as_str().unwrap().contains("p999"));
        let items = json!({"items": [{"id": "p001", "qty": 2}, {"id": "p120", "qty": 1}]});
        let expected = shop::price(&d, &[("p001".into(), 2), ("p120".into(), 1)]).unwrap();
        assert_eq!(c.post_json("/price", &items).unwrap(), (200, expected));
        assert_eq!(c.post_json("/price", &json!({"items": [{"id": "nope", "qty": 1}]})).unwrap().0, 400);
        assert_eq!(c.post_json("/price", &json!({"items": [{"id": "p001", "qty": -1}]})).unwrap().0, 400);
        assert_eq!(c.post_json("/price", &json!([1])).unwrap().0, 400);
        assert_eq!(c.post_json("/health", &json!({})).unwrap().0, 404);
        assert_eq!(c.get("/nothing").unwrap().0, 404);
    }

    #[test]
    fn decodes_percent_escapes() {
        assert_eq!(percent_decode("Amber%20Kettle").unwrap(), "Amber Kettle");
        assert_eq!(percent_decode("a+b%2Bc").unwrap(), "a b+c");
        assert_eq!(percent_decode("caf%C3%A9").unwrap(), "café");
        assert!(
            percent_decode("%4").is_err() && percent_decode("%zz").is_err() && percent_decode("%FF").is_err()
        );
    }

    #[test]
    fn the_exit_fault_lets_exactly_n_requests_through() {
        let b = Budget::new(Some(2));
        assert!(b.take() && !b.spent());
        assert!(b.take() && b.spent());
        assert!(!b.take());
        let unlimited = Budget::new(None);
        assert!((0..1000).all(|_| unlimited.take()) && !unlimited.spent());
        assert!(!Budget::new(Some(0)).take());
    }
}
