//! The cell's backing services (the `shop` suite's, docs/TOOLS-shop.md, and a mock's): where they
//! listen, the environment that tells a server under test where to find them, a small blocking
//! Redis client (`resp`), a small blocking HTTP/1.1 client (`http1`), the serving loop of the
//! lab's own HTTP services (`serve`), its API service (`api`) and its mock HTTP service (`mock`).
//! It does not start containers or decide when services are reset: the orchestrator does.

pub mod api;
pub mod http1;
pub mod mock;
pub mod pg;
pub mod resp;
pub mod serve;

/// The ports Redis and the lab's API service listen on, on the cell's loopback network (the
/// contract's, `spec::service`).
pub use crate::spec::{API_PORT, REDIS_PORT};
/// The variables that give a server under test their URLs (`redis://127.0.0.1:6379/0`,
/// `http://127.0.0.1:8901`).
pub use crate::spec::{ENV_API_URL, ENV_REDIS_URL};

/// The value of `$BENCHLAB_REDIS_URL` the lab sets.
pub fn redis_url() -> String {
    crate::spec::ServiceKind::Redis.server_env().1
}

/// The value of `$BENCHLAB_API_URL` the lab sets.
pub fn api_url() -> String {
    crate::spec::ServiceKind::Api.server_env().1
}

/// The `host:port` of a `redis://host:port[/db]` URL (db 0 only: the lab seeds db 0).
pub fn redis_addr(url: &str) -> Result<String, String> {
    let rest = url.strip_prefix("redis://").ok_or_else(|| format!("{url:?} is not a redis:// URL"))?;
    let (hostport, db) = rest.split_once('/').unwrap_or((rest, "0"));
    if !(db.is_empty() || db == "0") {
        return Err(format!("{url:?}: only database 0 is seeded"));
    }
    host_port(url, hostport, REDIS_PORT)
}

/// The `host:port` of an `http://host:port[/]` URL.
pub fn http_addr(url: &str) -> Result<String, String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("{url:?} is not an http:// URL"))?;
    let hostport = rest.trim_end_matches('/');
    if hostport.contains('/') {
        return Err(format!("{url:?}: a base URL has no path"));
    }
    host_port(url, hostport, 80)
}

fn host_port(url: &str, hostport: &str, default: u16) -> Result<String, String> {
    match hostport.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() => {
            port.parse::<u16>().map_err(|_| format!("{url:?}: bad port {port:?}"))?;
            Ok(hostport.to_string())
        }
        Some(_) => Err(format!("{url:?} has no host")),
        None if hostport.is_empty() => Err(format!("{url:?} has no host")),
        None => Ok(format!("{hostport}:{default}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_the_loopback_ports() {
        assert_eq!(redis_url(), "redis://127.0.0.1:6379/0");
        assert_eq!(api_url(), "http://127.0.0.1:8901");
        assert_eq!(redis_addr(&redis_url()).unwrap(), "127.0.0.1:6379");
        assert_eq!(redis_addr("redis://localhost").unwrap(), "localhost:6379");
        assert!(redis_addr("redis://127.0.0.1:6379/1").is_err());
        assert!(redis_addr("http://x").is_err());
        assert_eq!(http_addr(&api_url()).unwrap(), "127.0.0.1:8901");
        assert_eq!(http_addr("http://127.0.0.1:9/").unwrap(), "127.0.0.1:9");
        assert!(http_addr("http://127.0.0.1:x").is_err());
        assert!(http_addr("http://h/api").is_err());
    }
}
