//! HTTP basic authentication against bcrypt hashes, as the exporter
//! toolkit does it, with two guards of the CPU: a bcrypt check runs on a
//! blocking thread and at most one at a time (bcrypt is slow on purpose),
//! and its result is cached, so a scraper that sends the same right
//! password every second costs one bcrypt in total. Wrong guesses have
//! their own bounded cache, so a flood of them cannot evict the good ones.

use base64::Engine as _;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use subtle::ConstantTimeEq;
use tokio::sync::Semaphore;

/// Most cached results of each kind (right, wrong); a full cache is
/// emptied, which bounds memory and only costs later bcrypt checks.
pub const CACHE_ENTRIES: usize = 1024;

/// User name and password of an `Authorization: Basic` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Basic {
    /// The user name.
    pub user: String,
    /// The password, as sent.
    pub password: Vec<u8>,
}

/// The credentials of an `Authorization` header value; `None` when the
/// header is not basic authentication or not well-formed.
pub fn parse_basic(header: &[u8]) -> Option<Basic> {
    let text = std::str::from_utf8(header).ok()?.trim();
    let (scheme, rest) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()?;
    let colon = raw.iter().position(|&b| b == b':')?;
    let user = String::from_utf8(raw[..colon].to_vec()).ok()?;
    Some(Basic {
        user,
        password: raw[colon + 1..].to_vec(),
    })
}

/// The hash to check `user`'s password against and whether `user` exists.
/// Every configured name is compared in constant time and none is skipped,
/// so the time taken does not tell which names exist; an unknown user is
/// checked against some configured hash (same cost) and then refused.
pub fn lookup<'a>(users: &'a BTreeMap<String, String>, user: &str) -> Option<(&'a str, bool)> {
    let mut found: Option<&'a str> = None;
    for (name, hash) in users {
        if bool::from(name.as_bytes().ct_eq(user.as_bytes())) {
            found = Some(hash);
        }
    }
    match found {
        Some(h) => Some((h, true)),
        None => users.values().next().map(|h| (h.as_str(), false)),
    }
}

/// The cache key of one check: a digest, so no password is kept in memory.
fn cache_key(user: &str, hash: &str, password: &[u8]) -> [u8; 32] {
    let mut d = Sha256::new();
    for part in [user.as_bytes(), hash.as_bytes(), password] {
        d.update((part.len() as u64).to_le_bytes());
        d.update(part);
    }
    d.finalize().into()
}

/// Checks credentials; one per server.
#[derive(Debug)]
pub struct Authenticator {
    right: Mutex<HashSet<[u8; 32]>>,
    wrong: Mutex<HashSet<[u8; 32]>>,
    bcrypt: Arc<Semaphore>,
}

impl Default for Authenticator {
    fn default() -> Self {
        Authenticator {
            right: Mutex::new(HashSet::new()),
            wrong: Mutex::new(HashSet::new()),
            bcrypt: Arc::new(Semaphore::new(1)),
        }
    }
}

impl Authenticator {
    /// Whether the `Authorization` header value `header` names one of
    /// `users` with the right password. No users: everyone is allowed.
    pub async fn check(&self, users: &BTreeMap<String, String>, header: Option<&[u8]>) -> bool {
        if users.is_empty() {
            return true;
        }
        let Some(basic) = header.and_then(parse_basic) else {
            return false;
        };
        let Some((hash, known)) = lookup(users, &basic.user) else {
            return false;
        };
        let key = cache_key(&basic.user, hash, &basic.password);
        if let Some(ok) = self.cached(&key) {
            return ok && known;
        }
        let ok = self.bcrypt(hash.to_string(), basic.password).await && known;
        let cache = if ok { &self.right } else { &self.wrong };
        if let Ok(mut c) = cache.lock() {
            if c.len() >= CACHE_ENTRIES {
                c.clear();
            }
            c.insert(key);
        }
        ok
    }

    fn cached(&self, key: &[u8; 32]) -> Option<bool> {
        if self.right.lock().is_ok_and(|c| c.contains(key)) {
            return Some(true);
        }
        if self.wrong.lock().is_ok_and(|c| c.contains(key)) {
            return Some(false);
        }
        None
    }

    /// One bcrypt verification, off the async threads, one at a time.
    async fn bcrypt(&self, hash: String, password: Vec<u8>) -> bool {
        let Ok(_permit) = self.bcrypt.clone().acquire_owned().await else {
            return false;
        };
        tokio::task::spawn_blocking(move || bcrypt::verify(password, &hash).unwrap_or(false))
            .await
            .unwrap_or(false)
    }

    /// Results cached (right, wrong), for tests and the docs' claims.
    pub fn cached_counts(&self) -> (usize, usize) {
        let len = |m: &Mutex<HashSet<[u8; 32]>>| m.lock().map(|c| c.len()).unwrap_or(0);
        (len(&self.right), len(&self.wrong))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(user: &str, pass: &str) -> Vec<u8> {
        let b = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
        format!("Basic {b}").into_bytes()
    }

    fn users() -> BTreeMap<String, String> {
        // Cost 4 (the minimum) keeps the test fast; the logic is the same.
        let mut u = BTreeMap::new();
        u.insert("prometheus".to_string(), bcrypt::hash("s3cret", 4).unwrap());
        u.insert("ops".to_string(), bcrypt::hash("other", 4).unwrap());
        u
    }

    #[test]
    fn basic_header_parsing() {
        let b = parse_basic(&header("alice", "pa:ss")).unwrap();
        assert_eq!(b.user, "alice");
        assert_eq!(b.password, b"pa:ss", "only the first colon splits");
        assert!(parse_basic(b"Bearer abc").is_none());
        assert!(parse_basic(b"Basic !!!").is_none());
        assert!(parse_basic(b"Basic Zm9v").is_none(), "no colon");
        assert!(
            parse_basic(b"basic YTpi").is_some(),
            "scheme is case-insensitive"
        );
    }

    #[test]
    fn lookup_never_reports_an_unknown_user_as_known() {
        let u = users();
        assert_eq!(lookup(&u, "ops").map(|x| x.1), Some(true));
        let (hash, known) = lookup(&u, "nobody").unwrap();
        assert!(!known);
        assert!(
            hash.starts_with("$2"),
            "an unknown user still costs a bcrypt"
        );
        assert!(lookup(&BTreeMap::new(), "x").is_none());
    }

    #[tokio::test]
    async fn right_wrong_unknown_and_missing() {
        let a = Authenticator::default();
        let u = users();
        assert!(a.check(&u, Some(&header("prometheus", "s3cret"))).await);
        assert!(!a.check(&u, Some(&header("prometheus", "wrong"))).await);
        assert!(
            !a.check(&u, Some(&header("ops", "s3cret"))).await,
            "another user's password"
        );
        assert!(!a.check(&u, Some(&header("nobody", "s3cret"))).await);
        assert!(!a.check(&u, None).await);
        assert!(a.check(&BTreeMap::new(), None).await, "no users: open");
    }

    #[tokio::test]
    async fn results_are_cached_and_bounded() {
        let a = Authenticator::default();
        let u = users();
        for _ in 0..5 {
            assert!(a.check(&u, Some(&header("prometheus", "s3cret"))).await);
        }
        assert_eq!(a.cached_counts(), (1, 0), "one bcrypt for five requests");
        // Fill the wrong-guess cache to its bound (as a flood of distinct
        // guesses would, without paying a bcrypt each here).
        for i in 0..CACHE_ENTRIES {
            let key = cache_key(
                "prometheus",
                &u["prometheus"],
                format!("guess{i}").as_bytes(),
            );
            a.wrong.lock().unwrap().insert(key);
        }
        assert_eq!(a.cached_counts(), (1, CACHE_ENTRIES));
        assert!(!a.check(&u, Some(&header("prometheus", "one-more"))).await);
        assert_eq!(
            a.cached_counts(),
            (1, 1),
            "a full cache is emptied, right answers kept"
        );
        assert!(a.check(&u, Some(&header("prometheus", "s3cret"))).await);
    }
}
