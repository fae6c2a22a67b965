//! Generated arguments of a data suite (`args_gen` with the suite's `seed`): the generator kinds
//! and the one pseudo-random stream they draw from. Pure: the same seed, tool and call index give
//! the same arguments on every host and in every version that keeps this file's arithmetic.
//!
//! The stream is splitmix64 (Steele, Lea and Flood, 2014), written out here so that no crate's
//! version can change the calls. Call `i` of tool `t` starts from the state
//! `mix(seed ^ mix(fnv1a64(t)) ^ mix(i + GOLDEN))` and each draw is one splitmix64 step; the
//! arguments' keys draw in sorted order. An `int = [lo, hi]` is `lo + draw % (hi - lo + 1)`
//! (the modulo bias is below 2^-32 for any range the suites use), a `choice` is
//! `items[draw % len]`, a `string = n` is `n` characters, each `ALPHABET[draw % 36]`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How one argument is generated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Gen {
    /// An integer in `[lo, hi]`, both included.
    Int([i64; 2]),
    /// One of these values.
    Choice(Vec<Value>),
    /// A string of this many characters of [`ALPHABET`].
    String(usize),
}

/// The characters of a generated string.
pub const ALPHABET: &[u8; 36] = b"abcdefghijklmnopqrstuvwxyz0123456789";

/// splitmix64's increment (2^64 / the golden ratio).
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// The longest generated string: a generator is for calls, not for payload files.
pub const MAX_STRING: usize = 1 << 20;

/// splitmix64's output function.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn fnv1a64(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// The stream of one call.
pub struct Stream(u64);

impl Stream {
    pub fn new(seed: u64, tool: &str, i: u64) -> Stream {
        Stream(mix(seed ^ mix(fnv1a64(tool)) ^ mix(i.wrapping_add(GOLDEN))))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(GOLDEN);
        mix(self.0)
    }
}

impl Gen {
    /// Whether the generator can produce a value; the error says why not.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            Gen::Int([lo, hi]) if lo > hi => {
                Err(format!("int = [{lo}, {hi}]: the low end is above the high"))
            }
            Gen::Choice(items) if items.is_empty() => Err("choice = []: nothing to choose from".into()),
            Gen::String(n) if *n > MAX_STRING => {
                Err(format!("string = {n}: at most {MAX_STRING} characters"))
            }
            _ => Ok(()),
        }
    }

    fn draw(&self, s: &mut Stream) -> Value {
        match self {
            Gen::Int([lo, hi]) => {
                let span = hi.wrapping_sub(*lo) as u64;
                let off = match span.checked_add(1) {
                    Some(n) => s.next_u64() % n,
                    None => s.next_u64(), // the whole i64 range
                };
                Value::from(lo.wrapping_add(off as i64))
            }
            Gen::Choice(items) => items[(s.next_u64() % items.len() as u64) as usize].clone(),
            Gen::String(n) => {
                Value::String((0..*n).map(|_| ALPHABET[(s.next_u64() % 36) as usize] as char).collect())
            }
        }
    }
}

/// The arguments of call `i` of `tool`.
pub fn arguments(gens: &BTreeMap<String, Gen>, seed: u64, tool: &str, i: u64) -> Value {
    let mut s = Stream::new(seed, tool, i);
    Value::Object(gens.iter().map(|(k, g)| (k.clone(), g.draw(&mut s))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gens() -> BTreeMap<String, Gen> {
        [
            ("n".to_string(), Gen::Int([1, 30])),
            ("text".to_string(), Gen::Choice(vec![json!("a"), json!("b")])),
            ("s".to_string(), Gen::String(16)),
        ]
        .into()
    }

    #[test]
    fn splitmix64_is_the_published_one() {
        // The reference sequence of splitmix64 seeded with 0 (Vigna's splitmix64.c): the state
        // starts at 0 and each call adds GOLDEN before mixing.
        let mut s = Stream(0);
        assert_eq!(s.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(s.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(s.next_u64(), 0x06C4_5D18_8009_454F);
    }

    #[test]
    fn the_same_seed_gives_the_same_calls_and_another_seed_others() {
        let g = gens();
        let a: Vec<Value> = (0..50).map(|i| arguments(&g, 7, "t", i)).collect();
        let b: Vec<Value> = (0..50).map(|i| arguments(&g, 7, "t", i)).collect();
        assert_eq!(a, b);
        let c: Vec<Value> = (0..50).map(|i| arguments(&g, 8, "t", i)).collect();
        assert_ne!(a, c, "another seed");
        let d: Vec<Value> = (0..50).map(|i| arguments(&g, 7, "u", i)).collect();
        assert_ne!(a, d, "another tool");
        for v in &a {
            let n = v["n"].as_i64().unwrap();
            assert!((1..=30).contains(&n), "{v}");
            assert!(["a", "b"].contains(&v["text"].as_str().unwrap()));
            let s = v["s"].as_str().unwrap();
            assert_eq!(s.len(), 16);
            assert!(s.bytes().all(|b| ALPHABET.contains(&b)));
        }
        // Over 50 calls the values vary (a stuck stream would repeat one call).
        assert!(a.iter().any(|v| v != &a[0]));
        let ns: std::collections::BTreeSet<i64> = a.iter().map(|v| v["n"].as_i64().unwrap()).collect();
        assert!(ns.len() > 10, "{ns:?}");
    }

    #[test]
    fn generators_that_cannot_draw_are_refused() {
        assert!(Gen::Int([3, 2]).validate().unwrap_err().contains("above"));
        assert!(Gen::Choice(vec![]).validate().is_err());
        assert!(Gen::String(MAX_STRING + 1).validate().is_err());
        assert_eq!(Gen::Int([i64::MIN, i64::MAX]).validate(), Ok(()));
        let full = arguments(&[("x".to_string(), Gen::Int([i64::MIN, i64::MAX]))].into(), 1, "t", 0);
        assert!(full["x"].is_i64());
    }
}
