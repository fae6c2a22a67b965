//! The `shop` suite's data and answers (docs/TOOLS-shop.md): the dataset a seed generates, the lab
//! API's answers computed from it, the Redis commands that seed it, and the suite's tools, gate and
//! load calls. Pure: no socket, no process; the API service (`services::api`), the seeding
//! (`services::resp`) and the null server's tools do the I/O and answer with these functions.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};

use super::suite::Expected;

/// The seed of the dataset when a scenario names none.
pub const DEFAULT_SEED: u64 = 1;
/// The suite's name in scenarios and records.
pub const SUITE: &str = "shop";
/// Its tools, as tools/list lists them.
pub const TOOLS: &[&str] = &["checkout", "get_cart", "get_stock", "search_products"];
/// Products `p001`..`p120`.
pub const PRODUCTS: usize = 120;
/// Users `u01`..`u40`; the load reads the carts of `u21`..`u40` only.
pub const USERS: usize = 40;
/// Tax in percent of the subtotal, rounded half up to a whole cent.
pub const TAX_PERCENT: u64 = 8;
/// The user the gate checks out.
pub const GATE_BUYER: &str = "u02";

/// The first word of a product's name.
pub const ADJECTIVES: [&str; 16] = [
    "Amber", "Brisk", "Cedar", "Dusky", "Ember", "Frosty", "Golden", "Hazel", "Ivory", "Jade", "Lunar",
    "Misty", "Nimble", "Olive", "Quiet", "Rustic",
];
/// The second word of a product's name.
pub const NOUNS: [&str; 16] = [
    "Kettle", "Lantern", "Basket", "Blanket", "Candle", "Trowel", "Notebook", "Stapler", "Compass",
    "Hammock", "Puzzle", "Kite", "Wrench", "Ladle", "Planter", "Satchel",
];
/// A product's category.
pub const CATEGORIES: [&str; 6] = ["kitchen", "garden", "office", "outdoor", "toys", "tools"];

/// One product the API serves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Product {
    pub id: String,
    pub name: String,
    pub category: String,
    pub price_cents: u64,
}

/// Everything a seed generates: the API's catalogue, and the stock and carts seeded into Redis.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dataset {
    pub seed: u64,
    pub products: Vec<Product>,
    pub stock: BTreeMap<String, u64>,
    pub carts: BTreeMap<String, BTreeMap<String, u32>>,
}

/// splitmix64 (Steele, Lea and Flood 2014), written out so the data can never change under us.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value in `lo..=hi`, as `lo + next() % (hi - lo + 1)` (the modulo's bias is immaterial
    /// here, and this form is the one docs/TOOLS-shop.md states).
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

pub fn product_id(n: usize) -> String {
    format!("p{n:03}")
}

pub fn user_id(n: usize) -> String {
    format!("u{n:02}")
}

/// The dataset of `seed`, drawn in this order from one splitmix64 stream started at `seed`: for
/// each product, its adjective, noun, category and price; then each product's stock; then for each
/// user, the number of lines, and per line a product (drawn again while already in the cart) and
/// its quantity.
pub fn dataset(seed: u64) -> Dataset {
    let mut rng = SplitMix64(seed);
    let pick = |rng: &mut SplitMix64, n: usize| rng.range(0, n as u64 - 1) as usize;
    let products: Vec<Product> = (1..=PRODUCTS)
        .map(|n| {
            let adjective = ADJECTIVES[pick(&mut rng, ADJECTIVES.len())];
            let noun = NOUNS[pick(&mut rng, NOUNS.len())];
            let category = CATEGORIES[pick(&mut rng, CATEGORIES.len())];
            Product {
                id: product_id(n),
                name: format!("{adjective} {noun}"),
                category: category.into(),
                price_cents: rng.range(199, 19_999),
            }
        })
        .collect();
    let stock = products.iter().map(|p| (p.id.clone(), rng.range(5, 500))).collect();
    let carts = (1..=USERS)
        .map(|u| {
            let lines = rng.range(1, 4);
            let mut cart = BTreeMap::new();
            while (cart.len() as u64) < lines {
                let id = product_id(pick(&mut rng, PRODUCTS) + 1);
                if cart.contains_key(&id) {
                    continue;
                }
                cart.insert(id, rng.range(1, 3) as u32);
            }
            (user_id(u), cart)
        })
        .collect();
    Dataset { seed, products, stock, carts }
}

impl Dataset {
    pub fn product(&self, id: &str) -> Option<&Product> {
        // Ids are `p001`.. in order: the index is the number, when the id is well formed.
        let n: usize = id.strip_prefix('p').filter(|d| d.len() == 3)?.parse().ok()?;
        self.products.get(n.checked_sub(1)?).filter(|p| p.id == id)
    }
}

/// sha256 of the dataset's canonical JSON: what Redis was seeded with and what the API serves.
pub fn seed_sha256(d: &Dataset) -> String {
    crate::hash::canonical_hash(d)
}

/// `GET /search`: products whose name or category contains `query` (case-insensitively), by id,
/// the first `limit`, with the count of all matches.
pub fn search(d: &Dataset, query: &str, limit: usize) -> Value {
    let q = query.to_lowercase();
    let matches: Vec<&Product> = d
        .products
        .iter()
        .filter(|p| p.name.to_lowercase().contains(&q) || p.category.to_lowercase().contains(&q))
        .collect();
    let results: Vec<Value> = matches
        .iter()
        .take(limit)
        .map(|p| json!({"id": p.id, "name": p.name, "price_cents": p.price_cents}))
        .collect();
    json!({"results": results, "count": matches.len()})
}

/// `GET /items/<id>`.
pub fn item(d: &Dataset, id: &str) -> Option<Value> {
    d.product(id)
        .map(|p| json!({"id": p.id, "name": p.name, "category": p.category, "price_cents": p.price_cents}))
}

/// `POST /price`: subtotal, tax (8 %, half up to a cent, integers only) and total of `items`.
pub fn price(d: &Dataset, items: &[(String, u32)]) -> Result<Value, String> {
    let mut subtotal: u64 = 0;
    for (id, qty) in items {
        let p = d.product(id).ok_or_else(|| format!("unknown product {id:?}"))?;
        subtotal += p.price_cents * u64::from(*qty);
    }
    let tax = (subtotal * TAX_PERCENT + 50) / 100;
    Ok(json!({"subtotal_cents": subtotal, "tax_cents": tax, "total_cents": subtotal + tax}))
}

/// The Redis commands that seed the dataset (after a FLUSHALL the seeding sends first).
pub fn redis_commands(d: &Dataset) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> =
        d.stock.iter().map(|(id, n)| vec!["SET".into(), format!("stock:{id}"), n.to_string()]).collect();
    for (user, cart) in &d.carts {
        let mut cmd = vec!["HSET".to_string(), format!("cart:{user}")];
        for (id, qty) in cart {
            cmd.push(id.clone());
            cmd.push(qty.to_string());
        }
        out.push(cmd);
    }
    out.push(vec!["SET".into(), "orders".into(), "0".into()]);
    out
}

/// get_cart's answer from the cart's lines `(id, qty, price_cents)` (any order) and the price
/// API's total.
pub fn cart_value(user: &str, lines: &[(String, u32, u64)], total_cents: u64) -> Value {
    let mut lines = lines.to_vec();
    lines.sort();
    let items: Vec<Value> =
        lines.iter().map(|(id, qty, price)| json!({"id": id, "qty": qty, "price_cents": price})).collect();
    json!({"user": user, "items": items, "total_cents": total_cents})
}

/// checkout's answer: the order number INCR gave (none for an empty cart), the cart's line count
/// and the price API's total.
pub fn checkout_value(user: &str, order: Option<i64>, lines: usize, total_cents: u64) -> Value {
    json!({"user": user, "order": order, "items": lines, "total_cents": total_cents})
}

/// get_stock's answer.
pub fn stock_value(id: &str, name: &str, stock: i64) -> Value {
    json!({"id": id, "name": name, "stock": stock})
}

/// The price API's total_cents of `items`, from the answer `price` gives.
pub fn total_of(price_answer: &Value) -> Option<u64> {
    price_answer.get("total_cents").and_then(Value::as_u64)
}

/// What get_cart answers for a cart of the dataset as it is seeded.
fn seeded_cart(d: &Dataset, user: &str) -> Value {
    let cart = d.carts.get(user).cloned().unwrap_or_default();
    let items: Vec<(String, u32)> = cart.into_iter().collect();
    let lines: Vec<(String, u32, u64)> =
        items.iter().map(|(id, q)| (id.clone(), *q, d.product(id).map_or(0, |p| p.price_cents))).collect();
    let total =
        if items.is_empty() { 0 } else { price(d, &items).ok().as_ref().and_then(total_of).unwrap_or(0) };
    cart_value(user, &lines, total)
}

fn seeded_stock(d: &Dataset, id: &str, minus: u64) -> Value {
    let p = d.product(id).expect("a product of the dataset");
    stock_value(id, &p.name, d.stock[id] as i64 - minus as i64)
}

/// The gate's search: the first noun (lower-cased) that at least 3 products' names hold, so the
/// answer has several results and a count beyond its limit of 2 when it can.
fn gate_query(d: &Dataset) -> String {
    NOUNS
        .iter()
        .map(|n| n.to_lowercase())
        .find(|q| search(d, q, 0)["count"].as_u64().unwrap_or(0) >= 3)
        .unwrap_or_else(|| CATEGORIES[0].to_string())
}

/// The correctness gate, in order. It writes (checkout of `u02`), so a server gated a second time
/// against the same Redis fails: that shows the services are reset between servers.
pub fn gate(seed: u64) -> Vec<(&'static str, Value, Expected)> {
    use Expected::{Error, Value as V};
    let d = dataset(seed);
    let query = gate_query(&d);
    let buyer_cart = &d.carts[GATE_BUYER];
    let (watched, bought) = buyer_cart.iter().next().expect("every cart has 1 to 4 lines");
    let order_items: Vec<(String, u32)> = buyer_cart.iter().map(|(k, v)| (k.clone(), *v)).collect();
    let order_total =
        price(&d, &order_items).ok().as_ref().and_then(total_of).expect("the cart's products exist");
    vec![
        ("search_products", json!({"query": query, "limit": 2}), V(search(&d, &query, 2))),
        ("get_cart", json!({"user": "u01"}), V(seeded_cart(&d, "u01"))),
        ("get_stock", json!({"id": watched}), V(seeded_stock(&d, watched, 0))),
        (
            "checkout",
            json!({"user": GATE_BUYER}),
            V(checkout_value(GATE_BUYER, Some(1), buyer_cart.len(), order_total)),
        ),
        ("get_cart", json!({"user": GATE_BUYER}), V(cart_value(GATE_BUYER, &[], 0))),
        ("get_stock", json!({"id": watched}), V(seeded_stock(&d, watched, u64::from(*bought)))),
        ("get_stock", json!({"id": "nope"}), Error),
    ]
}

/// The queries search_products cycles through under load: every word, lower-cased, then the
/// categories.
pub fn load_queries() -> Vec<String> {
    ADJECTIVES
        .iter()
        .chain(NOUNS.iter())
        .map(|w| w.to_lowercase())
        .chain(CATEGORIES.iter().map(|c| c.to_string()))
        .collect()
}

/// The i-th load call of a read-only tool and its answer; `None` for checkout (its answer under
/// load depends on the order of calls) and unknown tools. get_cart reads `u21`..`u40` and
/// get_stock the products outside the gate buyer's cart, so what the gate wrote never shows.
pub fn call(seed: u64, tool: &str, i: u64) -> Option<(Value, Value)> {
    let d = dataset(seed);
    match tool {
        "search_products" => {
            let queries = load_queries();
            let q = &queries[(i % queries.len() as u64) as usize];
            let limit = (i % 10 + 1) as usize;
            Some((json!({"query": q, "limit": limit}), search(&d, q, limit)))
        }
        "get_cart" => {
            let user = user_id(21 + (i % 20) as usize);
            let v = seeded_cart(&d, &user);
            Some((json!({"user": user}), v))
        }
        "get_stock" => {
            let ids: Vec<&String> =
                d.stock.keys().filter(|id| !d.carts[GATE_BUYER].contains_key(*id)).collect();
            let id = ids[(i % ids.len() as u64) as usize];
            Some((json!({"id": id}), seeded_stock(&d, id, 0)))
        }
        _ => None,
    }
}

/// The suite's `tools/list` entries, in the order of `Suite::tools`.
pub fn tool_schemas() -> Vec<Value> {
    let schema = |name: &str, description: &str, properties: Value, required: &[&str]| {
        json!({
            "name": name,
            "description": description,
            "inputSchema": {"type": "object", "properties": properties, "required": required},
        })
    };
    vec![
        schema(
            "checkout",
            "Order a user's cart: price it, take its items from stock, empty it, number the order.",
            json!({"user": {"type": "string"}}),
            &["user"],
        ),
        schema(
            "get_cart",
            "A user's cart with each item's price and the cart's total with tax.",
            json!({"user": {"type": "string"}}),
            &["user"],
        ),
        schema("get_stock", "A product's name and stock.", json!({"id": {"type": "string"}}), &["id"]),
        schema(
            "search_products",
            "Products whose name or category contains the query.",
            json!({"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 0, "maximum": 50}}),
            &["query", "limit"],
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dataset_is_a_function_of_its_seed() {
        let a = dataset(DEFAULT_SEED);
        assert_eq!(a, dataset(DEFAULT_SEED));
        assert_eq!(seed_sha256(&a), seed_sha256(&dataset(DEFAULT_SEED)));
        let b = dataset(2);
        assert_ne!(a.products, b.products);
        assert_ne!(seed_sha256(&a), seed_sha256(&b));
        assert_eq!(a.products.len(), PRODUCTS);
        assert_eq!(a.products[0].id, "p001");
        assert_eq!(a.products[119].id, "p120");
        assert_eq!(a.carts.len(), USERS);
        for p in &a.products {
            assert!((199..=19_999).contains(&p.price_cents));
            assert!(CATEGORIES.contains(&p.category.as_str()));
            assert!((5..=500).contains(&a.stock[&p.id]));
        }
        for cart in a.carts.values() {
            assert!((1..=4).contains(&cart.len()));
            assert!(cart.values().all(|q| (1..=3).contains(q)));
            assert!(cart.keys().all(|id| a.product(id).is_some()));
        }
        // Pinned: seed 1's data as docs/TOOLS-shop.md shows it. A change here changes every
        // shop record's data; it must never happen silently.
        assert_eq!(seed_sha256(&a), "f6252990124c6d7356bb80de91f9ca21dc7d7dbfc5c877d16269de0d2bf853d7");
        assert_eq!(
            a.products[0],
            Product {
                id: "p001".into(),
                name: "Brisk Stapler".into(),
                category: "kitchen".into(),
                price_cents: 8270
            }
        );
        assert_eq!(a.stock["p001"], 8);
        assert_eq!(a.carts["u02"], BTreeMap::from([("p058".to_string(), 2)]));
        // 120 SETs, 40 HSETs, the order counter.
        assert_eq!(redis_commands(&a).len(), 161);
    }

    #[test]
    fn the_generator_is_splitmix64() {
        // The first outputs of splitmix64 from state 0, as the reference C code prints them.
        let mut r = SplitMix64(0);
        assert_eq!(r.next(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn price_rounds_tax_half_up_in_whole_cents() {
        let mut d = dataset(DEFAULT_SEED);
        d.products[0].price_cents = 1_000;
        let one = |d: &Dataset, id: &str, q: u32| price(d, &[(id.to_string(), q)]).unwrap();
        assert_eq!(one(&d, "p001", 1), json!({"subtotal_cents": 1000, "tax_cents": 80, "total_cents": 1080}));
        assert_eq!(one(&d, "p001", 3)["total_cents"], 3240);
        // 8 % of: 1 → 0.08, 6 → 0.48, 7 → 0.56, 19 → 1.52, 1006 → 80.48, 1007 → 80.56 cents.
        for (cents, tax) in [(1, 0), (6, 0), (7, 1), (19, 2), (1_006, 80), (1_007, 81), (19_999, 1_600)] {
            d.products[1].price_cents = cents;
            assert_eq!(one(&d, "p002", 1)["tax_cents"], tax, "{cents}");
        }
        let both = price(&d, &[("p001".into(), 2), ("p002".into(), 1)]).unwrap();
        assert_eq!(both["subtotal_cents"], 2_000 + 19_999);
        assert!(price(&d, &[("nope".into(), 1)]).unwrap_err().contains("nope"));
        assert_eq!(price(&d, &[]).unwrap()["total_cents"], 0);
    }

    #[test]
    fn search_matches_names_and_categories_case_insensitively() {
        let d = dataset(DEFAULT_SEED);
        let all = search(&d, "", 1_000);
        assert_eq!(all["count"], PRODUCTS);
        let first = &d.products[0];
        let noun = first.name.split(' ').nth(1).unwrap().to_uppercase();
        let got = search(&d, &noun, 3);
        assert_eq!(got["results"][0]["id"], first.id);
        assert!(got["results"].as_array().unwrap().len() <= 3);
        let expected = d.products.iter().filter(|p| p.name.to_uppercase().contains(&noun)).count();
        assert_eq!(got["count"], expected);
        let garden = search(&d, "GARDEN", 50);
        let ids: Vec<&str> =
            garden["results"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted);
        assert!(ids.iter().all(|id| d.product(id).unwrap().category == "garden"));
        assert_eq!(search(&d, "zzz", 10), json!({"results": [], "count": 0}));
        assert_eq!(item(&d, "p007").unwrap()["category"], d.products[6].category.as_str());
        assert!(item(&d, "p121").is_none() && item(&d, "p000").is_none() && item(&d, "x").is_none());
    }

    /// Replays the gate's calls on a model of Redis and the API built from the dataset, applying
    /// checkout's writes, and checks every expected value against the model.
    #[test]
    fn the_gate_agrees_with_the_dataset_after_checkout() {
        for seed in [DEFAULT_SEED, 2, 77, u64::MAX] {
            let mut d = dataset(seed);
            let mut orders = 0i64;
            let gate = gate(seed);
            assert_eq!(
                gate.iter().map(|g| g.0).collect::<Vec<_>>(),
                [
                    "search_products",
                    "get_cart",
                    "get_stock",
                    "checkout",
                    "get_cart",
                    "get_stock",
                    "get_stock"
                ]
            );
            if let Expected::Value(v) = &gate[0].2 {
                assert!(v["count"].as_u64().unwrap() >= 2, "{seed}: {v}");
            }
            for (tool, args, expected) in gate {
                let got = model_call(&mut d, &mut orders, tool, &args);
                match expected {
                    Expected::Value(v) => assert_eq!(got, Ok(v), "{seed} {tool} {args}"),
                    Expected::Error => assert!(got.is_err(), "{seed} {tool} {args}"),
                    Expected::Check(c) => panic!("the shop's gate has values, not checks: {c:?}"),
                }
            }
            assert_eq!(orders, 1);
        }
    }

    /// The tools' semantics over an in-memory Redis (the dataset's stock and carts).
    fn model_call(d: &mut Dataset, orders: &mut i64, tool: &str, args: &Value) -> Result<Value, String> {
        let user = args.get("user").and_then(Value::as_str).unwrap_or("");
        let cart: Vec<(String, u32)> =
            d.carts.get(user).map(|c| c.clone().into_iter().collect()).unwrap_or_default();
        match tool {
            "search_products" => {
                Ok(search(d, args["query"].as_str().unwrap(), args["limit"].as_u64().unwrap() as usize))
            }
            "get_cart" => Ok(seeded_cart(d, user)),
            "get_stock" => {
                let id = args["id"].as_str().unwrap();
                let p = d.product(id).ok_or("unknown")?;
                Ok(stock_value(id, &p.name, d.stock[id] as i64))
            }
            "checkout" if cart.is_empty() => Ok(checkout_value(user, None, 0, 0)),
            "checkout" => {
                let total = total_of(&price(d, &cart)?).unwrap();
                for (id, q) in &cart {
                    *d.stock.get_mut(id).unwrap() -= u64::from(*q);
                }
                d.carts.remove(user);
                *orders += 1;
                Ok(checkout_value(user, Some(*orders), cart.len(), total))
            }
            _ => Err("unknown tool".into()),
        }
    }

    #[test]
    fn load_calls_read_only_what_the_gate_leaves_alone() {
        let d = dataset(DEFAULT_SEED);
        for i in 0..200 {
            let (args, _) = call(DEFAULT_SEED, "get_cart", i).unwrap();
            let n: usize = args["user"].as_str().unwrap()[1..].parse().unwrap();
            assert!((21..=40).contains(&n));
            let (args, v) = call(DEFAULT_SEED, "get_stock", i).unwrap();
            assert!(!d.carts[GATE_BUYER].contains_key(args["id"].as_str().unwrap()));
            assert_eq!(v["stock"], d.stock[args["id"].as_str().unwrap()]);
            let (args, v) = call(DEFAULT_SEED, "search_products", i).unwrap();
            assert!(v["results"].as_array().unwrap().len() <= args["limit"].as_u64().unwrap() as usize);
        }
        assert!(call(DEFAULT_SEED, "checkout", 0).is_none());
        let names: Vec<String> = tool_schemas().iter().map(|t| t["name"].as_str().unwrap().into()).collect();
        assert_eq!(names, ["checkout", "get_cart", "get_stock", "search_products"]);
    }
}
