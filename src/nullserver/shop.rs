//! The null server's `shop` tools (docs/TOOLS-shop.md): real I/O against the cell's Redis and the
//! lab's API service through blocking clients opened at the first call and kept for the process.
//! Blocking loopback I/O on the HTTP server's one thread (a current-thread runtime) is acceptable
//! for the floor server: it answers one request at a time anyway. The answers' shapes are
//! `mcp::shop`'s; this file only fetches what they are built from.

use std::time::Duration;

use serde_json::{json, Value};

use crate::mcp::shop;
use crate::services::http1::{self, percent_encode};
use crate::services::resp::{self, Reply};
use crate::services::{self as svc, ENV_API_URL, ENV_REDIS_URL};

/// Bounds a connect and every read and write to a service.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// The clients of the two services, and the `shop_wrong` fault.
pub struct ShopTools {
    redis_addr: Result<String, String>,
    api_addr: Result<String, String>,
    redis: Option<resp::Client>,
    api: Option<http1::Client>,
    /// `shop_wrong`: get_cart and checkout answer a total one cent too high.
    wrong: bool,
}

impl ShopTools {
    /// Clients of `$BENCHLAB_REDIS_URL` and `$BENCHLAB_API_URL` (default: the lab's loopback
    /// ports), connected at the first call.
    pub fn from_env(wrong: bool) -> ShopTools {
        let var =
            |k: &str, default: String| std::env::var(k).ok().filter(|v| !v.is_empty()).unwrap_or(default);
        let redis_addr = svc::redis_addr(&var(ENV_REDIS_URL, svc::redis_url()))
            .map_err(|e| format!("${ENV_REDIS_URL}: {e}"));
        let api_addr =
            svc::http_addr(&var(ENV_API_URL, svc::api_url())).map_err(|e| format!("${ENV_API_URL}: {e}"));
        ShopTools { redis_addr, api_addr, redis: None, api: None, wrong }
    }

    /// Clients of these `host:port` addresses.
    pub fn new(redis_addr: &str, api_addr: &str, wrong: bool) -> ShopTools {
        ShopTools {
            redis_addr: Ok(redis_addr.into()),
            api_addr: Ok(api_addr.into()),
            redis: None,
            api: None,
            wrong,
        }
    }

    /// One tool call; a service's failure is an error naming the service.
    pub fn call(&mut self, tool: &str, args: &Value) -> Result<Value, String> {
        let arg = |k: &str| {
            args.get(k).and_then(Value::as_str).ok_or_else(|| format!("{tool} needs a string argument {k}"))
        };
        match tool {
            "search_products" => {
                let query = arg("query")?;
                let limit = match args.get("limit") {
                    None | Some(Value::Null) => 10,
                    Some(l) => l.as_u64().ok_or("limit must be a whole number")?,
                };
                self.api_json("GET", &format!("/search?q={}&limit={limit}", percent_encode(query)), None)
            }
            "get_cart" => {
                let user = arg("user")?;
                let cart = self.cart(user)?;
                let mut lines = Vec::with_capacity(cart.len());
                // One after another: the floor server is one thread.
                for (id, qty) in &cart {
                    let item = self.api_json("GET", &format!("/items/{}", percent_encode(id)), None)?;
                    let price = item
                        .get("price_cents")
                        .and_then(Value::as_u64)
                        .ok_or("the API: an item without price_cents")?;
                    lines.push((id.clone(), *qty, price));
                }
                let total = if cart.is_empty() { 0 } else { self.price(&cart)? };
                Ok(shop::cart_value(user, &lines, total + u64::from(self.wrong)))
            }
            "checkout" => {
                let user = arg("user")?;
                self.checkout(user)
            }
            "get_stock" => {
                let id = arg("id")?;
                let stock = match self.redis(&[vec!["GET".into(), format!("stock:{id}")]])?.remove(0) {
                    Reply::Bulk(None) => return Err(format!("unknown product {id:?}")),
                    r => r
                        .as_text()
                        .and_then(|t| t.parse::<i64>().ok())
                        .ok_or_else(|| format!("redis: stock:{id} holds {r:?}"))?,
                };
                let item = self.api_json("GET", &format!("/items/{}", percent_encode(id)), None)?;
                let name = item.get("name").and_then(Value::as_str).ok_or("the API: an item without name")?;
                Ok(shop::stock_value(id, name, stock))
            }
            _ => Err(format!("unknown tool: {tool}")),
        }
    }

    fn checkout(&mut self, user: &str) -> Result<Value, String> {
        let cart = self.cart(user)?;
        let bump = u64::from(self.wrong);
        if cart.is_empty() {
            return Ok(shop::checkout_value(user, None, 0, bump));
        }
        let total = self.price(&cart)?;
        let mut cmds: Vec<Vec<String>> =
            cart.iter().map(|(id, q)| vec!["DECRBY".into(), format!("stock:{id}"), q.to_string()]).collect();
        cmds.push(vec!["DEL".into(), format!("cart:{user}")]);
        cmds.push(vec!["INCR".into(), "orders".into()]);
        let order =
            self.redis(&cmds)?.pop().and_then(|r| r.as_int()).ok_or("redis: INCR orders gave no integer")?;
        Ok(shop::checkout_value(user, Some(order), cart.len(), total + bump))
    }

    /// `HGETALL cart:<user>` as (id, qty), by id.
    fn cart(&mut self, user: &str) -> Result<Vec<(String, u32)>, String> {
        let reply = self.redis(&[vec!["HGETALL".into(), format!("cart:{user}")]])?.remove(0);
        let Reply::Array(Some(fields)) = reply else {
            return Err(format!("redis: HGETALL cart:{user} answered {reply:?}"));
        };
        let mut cart: Vec<(String, u32)> = fields
            .chunks(2)
            .map(|pair| {
                match (pair[0].as_text(), pair.get(1).and_then(Reply::as_text).and_then(|q| q.parse().ok())) {
                    (Some(id), Some(qty)) => Ok((id.to_string(), qty)),
                    _ => Err(format!("redis: cart:{user} holds {pair:?}")),
                }
            })
            .collect::<Result<_, _>>()?;
        cart.sort();
        Ok(cart)
    }

    /// `POST /price`'s total_cents for `items`.
    fn price(&mut self, items: &[(String, u32)]) -> Result<u64, String> {
        let body =
            json!({"items": items.iter().map(|(id, qty)| json!({"id": id, "qty": qty})).collect::<Vec<_>>()});
        let v = self.api_json("POST", "/price", Some(&body))?;
        shop::total_of(&v).ok_or_else(|| format!("the API: POST /price answered {v}"))
    }

    /// Commands pipelined on the kept connection; a Redis error reply is an error. An I/O error
    /// drops the connection, so the next call connects again.
    fn redis(&mut self, cmds: &[Vec<String>]) -> Result<Vec<Reply>, String> {
        let addr = self.redis_addr.clone()?;
        if self.redis.is_none() {
            self.redis = Some(resp::Client::connect(&addr, IO_TIMEOUT)?);
        }
        let replies = self.redis.as_mut().expect("connected above").pipeline(cmds).map_err(|e| {
            self.redis = None;
            format!("redis at {addr}: {e}")
        })?;
        replies
            .into_iter()
            .zip(cmds)
            .map(|(r, cmd)| r.ok().map_err(|e| format!("redis at {addr}: {}: {e}", cmd.join(" "))))
            .collect()
    }

    /// A request to the API whose answer must be 200.
    fn api_json(&mut self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, String> {
        let addr = self.api_addr.clone()?;
        let client = self.api.get_or_insert_with(|| http1::Client::new(&addr, IO_TIMEOUT));
        let answer = match body {
            Some(b) => client.post_json(path, b),
            None => client.get(path),
        };
        match answer {
            Ok((200, v)) => Ok(v),
            Ok((404, _)) if path.starts_with("/items/") => {
                Err(format!("unknown product {:?}", &path["/items/".len()..]))
            }
            Ok((status, v)) => Err(format!("the API at {addr}: {method} {path} answered {status} {v}")),
            Err(e) => Err(format!("the API: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::suite::Expected;
    use crate::mcp::values_match;
    use crate::services::{api, resp::fake};

    /// A fake Redis seeded from `seed` and the real API service, both on free ports.
    fn services(seed: u64) -> (String, String) {
        let redis = fake::start();
        resp::seed_redis(redis, &shop::dataset(seed), IO_TIMEOUT).unwrap();
        let api = api::tests::start(seed);
        (format!("127.0.0.1:{redis}"), format!("127.0.0.1:{api}"))
    }

    fn gate_failures(tools: &mut ShopTools, seed: u64) -> Vec<String> {
        let mut failed = Vec::new();
        for (tool, args, expected) in shop::gate(seed) {
            let got = tools.call(tool, &args);
            let ok = match (&expected, &got) {
                (Expected::Value(v), Ok(g)) => values_match(v, g),
                (Expected::Error, Err(_)) => true,
                _ => false,
            };
            if !ok {
                failed.push(format!("{tool} {args}: expected {expected:?}, got {got:?}"));
            }
        }
        failed
    }

    #[test]
    fn the_gate_passes_once_and_fails_without_a_reset() {
        let seed = 5;
        let (redis, api) = services(seed);
        let mut tools = ShopTools::new(&redis, &api, false);
        assert_eq!(gate_failures(&mut tools, seed), Vec::<String>::new());
        for tool in ["search_products", "get_cart", "get_stock"] {
            for i in 0..40 {
                let (args, expected) = shop::call(seed, tool, i).unwrap();
                let got = tools.call(tool, &args).unwrap();
                assert!(values_match(&expected, &got), "{tool} {args}: {expected} vs {got}");
            }
        }
        // A second server on the same services: u02's cart is gone and the order is number 2.
        let again = gate_failures(&mut ShopTools::new(&redis, &api, false), seed);
        let steps: Vec<&str> = again.iter().map(|f| f.split(' ').next().unwrap()).collect();
        assert_eq!(steps, ["get_stock", "checkout"], "{again:?}");
        // Reseeded, it passes again.
        resp::seed_redis(
            redis.rsplit_once(':').unwrap().1.parse().unwrap(),
            &shop::dataset(seed),
            IO_TIMEOUT,
        )
        .unwrap();
        assert_eq!(gate_failures(&mut ShopTools::new(&redis, &api, false), seed), Vec::<String>::new());
    }

    #[test]
    fn the_wrong_fault_fails_the_gate_on_totals() {
        let seed = 6;
        let (redis, api) = services(seed);
        let failed = gate_failures(&mut ShopTools::new(&redis, &api, true), seed);
        let tools: Vec<&str> = failed.iter().map(|f| f.split(' ').next().unwrap()).collect();
        assert_eq!(tools, ["get_cart", "checkout", "get_cart"], "{failed:?}");
        assert!(failed[0].contains("total_cents"));
    }

    #[test]
    fn a_service_down_is_a_tool_error_naming_it() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
        let mut tools = ShopTools::new(&closed, &closed, false);
        let e = tools.call("get_cart", &json!({"user": "u01"})).unwrap_err();
        assert!(e.contains("redis") && e.contains(&closed), "{e}");
        let e = tools.call("search_products", &json!({"query": "kite", "limit": 3})).unwrap_err();
        assert!(e.contains("API") && e.contains(&closed), "{e}");
        assert!(tools.call("get_stock", &json!({})).unwrap_err().contains("id"));
        let bad = ShopTools::from_env(false);
        assert!(bad.redis_addr.is_ok() || bad.redis_addr.unwrap_err().contains(ENV_REDIS_URL));
    }
}
