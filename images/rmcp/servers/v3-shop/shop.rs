//! The `shop` suite (docs/TOOLS-shop.md) on rmcp: `search_products`, `get_cart`, `checkout` and
//! `get_stock`, async `#[tool]` methods doing real I/O against the cell's services with clients
//! kept for the process (every session's handler shares them): redis-rs's `ConnectionManager`
//! (one multiplexed connection that pipelines the commands of concurrent calls, made at the first
//! call; checkout's writes go in one MULTI/EXEC) for `$BENCHLAB_REDIS_URL`, and hyper-util's
//! pooled HTTP/1.1 keep-alive client for `$BENCHLAB_API_URL`. get_cart fetches its items and its
//! price concurrently. Values are `Json<T>` structured results (with their text); a failure of
//! either service is an `isError` result that names it. rmcp checks arguments by deserialising
//! them, not against the schema, so search's limit bounds are checked here too. Served by
//! `serve.rs`.

mod serve;

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::Duration;

use futures::future::{try_join, try_join_all};
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, body::Bytes, header::CONTENT_TYPE};
use hyper_util::{
    client::legacy::{Client, connect::HttpConnector},
    rt::{TokioExecutor, TokioTimer},
};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use rmcp::{
    Json, ServerHandler,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    tool, tool_handler, tool_router,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::json;

/// Bounds a connect, and every Redis reply and API exchange, as the null server's clients do.
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// Percent-encodes all but the unreserved bytes (`A-Z a-z 0-9 - . _ ~`).
const QUERY: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.').remove(b'_').remove(b'~');

/// The process's service clients.
struct Services {
    redis_url: String,
    api_url: String,
    /// Made at the first call, inside the runtime; an unusable URL is kept as its error.
    redis: OnceLock<Result<ConnectionManager, String>>,
    api: Client<HttpConnector, Full<Bytes>>,
}

fn services() -> &'static Services {
    static SERVICES: OnceLock<Services> = OnceLock::new();
    SERVICES.get_or_init(|| {
        let var = |k: &str, default: &str| {
            std::env::var(k).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| default.into())
        };
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(IO_TIMEOUT));
        Services {
            redis_url: var("BENCHLAB_REDIS_URL", "redis://127.0.0.1:6379/0"),
            api_url: var("BENCHLAB_API_URL", "http://127.0.0.1:8901").trim_end_matches('/').into(),
            redis: OnceLock::new(),
            api: Client::builder(TokioExecutor::new()).pool_timer(TokioTimer::new()).build(connector),
        }
    })
}

/// An error and its causes, one after the other.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    text
}

impl Services {
    /// A handle on the process's Redis connection. The manager reconnects by itself after a lost
    /// connection; a connection attempt that fails is not retried with a backoff (a call never
    /// waits one out, as node-redis's offline queue is off in the TS server): it fails its call,
    /// and the next call tries again.
    fn redis(&self) -> Result<ConnectionManager, String> {
        self.redis
            .get_or_init(|| {
                let config = ConnectionManagerConfig::new()
                    .set_number_of_retries(0)
                    .set_connection_timeout(Some(IO_TIMEOUT))
                    .set_response_timeout(Some(IO_TIMEOUT));
                redis::Client::open(self.redis_url.as_str())
                    .and_then(|client| ConnectionManager::new_lazy_with_config(client, config))
                    .map_err(|e| format!("redis at {}: {e}", self.redis_url))
            })
            .clone()
    }

    /// One command or MULTI/EXEC pipeline; an error names Redis and `what`. A refused connection
    /// sent nothing: that is tried once more, on the attempt the refusal started (the one that
    /// failed may be from before Redis came back).
    async fn redis_do<T: redis::FromRedisValue>(&self, what: &str, op: Op<'_>) -> Result<T, String> {
        let mut con = self.redis()?;
        let mut retried = false;
        loop {
            let result = match op {
                Op::One(cmd) => cmd.query_async(&mut con).await,
                Op::Pipe(pipe) => pipe.query_async(&mut con).await,
            };
            match result {
                Err(e) if e.is_connection_refusal() && !retried => retried = true,
                result => return result.map_err(|e| format!("redis at {}: {what}: {e}", self.redis_url)),
            }
        }
    }

    /// `HGETALL cart:<user>` as (id, qty) lines, by id.
    async fn cart(&self, user: &str) -> Result<Vec<(String, i64)>, String> {
        let key = format!("cart:{user}");
        let fields: BTreeMap<String, i64> =
            self.redis_do(&format!("HGETALL {key}"), Op::One(redis::cmd("HGETALL").arg(&key))).await?;
        Ok(fields.into_iter().collect())
    }

    /// One exchange with the API: its status and body; an error names the API.
    async fn exchange(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<(u16, Bytes), String> {
        let fail = |e: String| format!("the API at {}: {method} {path}: {e}", self.api_url);
        let mut req = Request::builder().method(method.clone()).uri(format!("{}{path}", self.api_url));
        if body.is_some() {
            req = req.header(CONTENT_TYPE, "application/json");
        }
        let req =
            req.body(Full::new(Bytes::from(body.unwrap_or_default()))).map_err(|e| fail(e.to_string()))?;
        let exchange = async {
            let res = self.api.request(req).await.map_err(|e| chain(&e))?;
            let status = res.status().as_u16();
            let text = res.into_body().collect().await.map_err(|e| chain(&e))?.to_bytes();
            Ok((status, text))
        };
        tokio::time::timeout(IO_TIMEOUT, exchange)
            .await
            .map_err(|_| fail(format!("no answer in {} s", IO_TIMEOUT.as_secs())))?
            .map_err(fail)
    }

    /// A request to the API whose answer must be 200, as `T`.
    async fn api<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<T, String> {
        let (status, text) = self.exchange(method.clone(), path, body).await?;
        self.answer(method, path, status, &text)
    }

    /// A 200 answer as `T`; any other is an error naming the API.
    fn answer<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        status: u16,
        text: &[u8],
    ) -> Result<T, String> {
        let api = &self.api_url;
        let text_of = || String::from_utf8_lossy(text);
        if status != 200 {
            return Err(format!("the API at {api}: {method} {path} answered {status} {}", text_of()));
        }
        serde_json::from_slice(text)
            .map_err(|e| format!("the API at {api}: {method} {path} answered {}: {e}", text_of()))
    }

    /// `GET /items/<id>`; a 404 is an unknown product.
    async fn item(&self, id: &str) -> Result<Item, String> {
        let path = format!("/items/{}", utf8_percent_encode(id, QUERY));
        match self.exchange(Method::GET, &path, None).await? {
            (404, _) => Err(format!("unknown product {}", json!(id))),
            (status, text) => self.answer(Method::GET, &path, status, &text),
        }
    }

    /// `POST /price`'s total_cents (tax included) for the cart's lines.
    async fn price(&self, cart: &[(String, i64)]) -> Result<u64, String> {
        let items: Vec<_> = cart.iter().map(|(id, qty)| json!({"id": id, "qty": qty})).collect();
        let body = serde_json::to_vec(&json!({ "items": items })).map_err(|e| e.to_string())?;
        let price: Price = self.api(Method::POST, "/price", Some(body)).await?;
        Ok(price.total_cents)
    }
}

/// What `Services::redis_do` sends: one command, or a pipeline (checkout's MULTI/EXEC).
#[derive(Clone, Copy)]
enum Op<'a> {
    One(&'a redis::Cmd),
    Pipe(&'a redis::Pipeline),
}

/// What `GET /items/<id>` answers that the tools use.
#[derive(Deserialize)]
struct Item {
    name: String,
    price_cents: u64,
}

/// What `POST /price` answers that the tools use.
#[derive(Deserialize)]
struct Price {
    total_cents: u64,
}

#[derive(Deserialize, JsonSchema)]
struct SearchArgs {
    query: String,
    #[schemars(range(min = 0, max = 50))]
    limit: i64,
}

#[derive(Deserialize, JsonSchema)]
struct UserArgs {
    user: String,
}

#[derive(Deserialize, JsonSchema)]
struct IdArgs {
    id: String,
}

/// `GET /search`'s answer, passed on as is.
#[derive(Serialize, Deserialize, JsonSchema)]
struct Search {
    results: Vec<Hit>,
    count: u64,
}

#[derive(Serialize, Deserialize, JsonSchema)]
struct Hit {
    id: String,
    name: String,
    price_cents: u64,
}

#[derive(Serialize, JsonSchema)]
struct Cart {
    user: String,
    items: Vec<Line>,
    total_cents: u64,
}

#[derive(Serialize, JsonSchema)]
struct Line {
    id: String,
    qty: i64,
    price_cents: u64,
}

#[derive(Serialize, JsonSchema)]
struct Order {
    user: String,
    order: Option<i64>,
    items: usize,
    total_cents: u64,
}

#[derive(Serialize, JsonSchema)]
struct Stock {
    id: String,
    name: String,
    stock: i64,
}

#[derive(Clone)]
struct Shop {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl Shop {
    fn new() -> Self {
        Self { tool_router: Self::tool_router() }
    }

    #[tool(
        description = "Order a user's cart: price it, take its items from stock, empty it, number the order."
    )]
    async fn checkout(
        &self,
        Parameters(UserArgs { user }): Parameters<UserArgs>,
    ) -> Result<Json<Order>, String> {
        let s = services();
        let cart = s.cart(&user).await?;
        if cart.is_empty() {
            return Ok(Json(Order { user, order: None, items: 0, total_cents: 0 }));
        }
        let total_cents = s.price(&cart).await?;
        let mut tx = redis::pipe();
        tx.atomic();
        for (id, qty) in &cart {
            tx.cmd("DECRBY").arg(format!("stock:{id}")).arg(qty).ignore();
        }
        tx.cmd("DEL").arg(format!("cart:{user}")).ignore();
        tx.cmd("INCR").arg("orders");
        let (order,): (i64,) = s.redis_do(&format!("checkout of cart:{user}"), Op::Pipe(&tx)).await?;
        Ok(Json(Order { user, order: Some(order), items: cart.len(), total_cents }))
    }

    #[tool(description = "A user's cart with each item's price and the cart's total with tax.")]
    async fn get_cart(
        &self,
        Parameters(UserArgs { user }): Parameters<UserArgs>,
    ) -> Result<Json<Cart>, String> {
        let s = services();
        let cart = s.cart(&user).await?;
        if cart.is_empty() {
            return Ok(Json(Cart { user, items: Vec::new(), total_cents: 0 }));
        }
        // Every /items call and the /price call at once, as the TS server's Promise.all.
        let items = try_join_all(cart.iter().map(|(id, _)| s.item(id)));
        let (items, total_cents) = try_join(items, s.price(&cart)).await?;
        let items = cart
            .into_iter()
            .zip(items)
            .map(|((id, qty), item)| Line { id, qty, price_cents: item.price_cents })
            .collect();
        Ok(Json(Cart { user, items, total_cents }))
    }

    #[tool(description = "A product's name and stock.")]
    async fn get_stock(&self, Parameters(IdArgs { id }): Parameters<IdArgs>) -> Result<Json<Stock>, String> {
        let s = services();
        let key = format!("stock:{id}");
        let stock: Option<i64> =
            s.redis_do(&format!("GET {key}"), Op::One(redis::cmd("GET").arg(&key))).await?;
        let Some(stock) = stock else {
            return Err(format!("unknown product {}", json!(id)));
        };
        let item = s.item(&id).await?;
        Ok(Json(Stock { id, name: item.name, stock }))
    }

    #[tool(description = "Products whose name or category contains the query.")]
    async fn search_products(
        &self,
        Parameters(SearchArgs { query, limit }): Parameters<SearchArgs>,
    ) -> Result<Json<Search>, String> {
        if !(0..=50).contains(&limit) {
            return Err("limit must be 0 to 50".into());
        }
        let path = format!("/search?q={}&limit={limit}", utf8_percent_encode(&query, QUERY));
        Ok(Json(services().api(Method::GET, &path, None).await?))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Shop {
    fn get_info(&self) -> serve::Info {
        serve::info("shop")
    }
}

fn main() {
    serve::main(Shop::new, None);
}
