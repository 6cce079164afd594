//! One listener's book of connections: which hold a place under its cap,
//! how many each source holds, what a connection over a share gets, and
//! which connection is shed when the cap is near. No IO: the caller closes
//! what the book tells it to.
//!
//! A connection from a source that already holds its share
//! (`max_connections_per_source`) is answered 503; as many again of that
//! source's may wait for that answer at once, and further ones are closed
//! unanswered, so a source over its share holds at most twice its share
//! of the listener's sockets. Connections from a trusted proxy have no
//! source here (their clients are counted per request, [`InFlight`]).
//!
//! Once the connections holding a place reach the high-water mark (90% of
//! the cap), every new connection first sheds one that has not
//! authenticated: preferably one with no request in the app (idle, or
//! still sending its head), then one from the source holding the most,
//! then the oldest. A connection that has authenticated is never shed, so
//! unauthenticated connections cannot keep authenticated ones' new
//! connections out: they only take each other's places.

use super::source::Source;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// What a connection's requests tell the book about it.
#[derive(Debug, Default)]
pub struct Mark {
    /// A request on it authenticated (a run token, an admin JWT or a web
    /// session).
    authenticated: AtomicBool,
    /// Requests being served or streaming their response body.
    busy: AtomicU32,
}

impl Mark {
    pub fn authenticate(&self) {
        // Read first: most requests find it set, and a store would dirty
        // a line other threads read.
        if !self.authenticated.load(Ordering::Relaxed) {
            self.authenticated.store(true, Ordering::Relaxed);
        }
    }

    pub fn authenticated(&self) -> bool {
        self.authenticated.load(Ordering::Relaxed)
    }

    pub fn enter(&self) {
        self.busy.fetch_add(1, Ordering::Relaxed);
    }

    pub fn leave(&self) {
        // Never below zero, whatever the order of drops.
        let _ = self
            .busy
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    pub fn busy(&self) -> bool {
        self.busy.load(Ordering::Relaxed) > 0
    }
}

/// What a new connection is, decided when it is accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Holds a place under the cap (the book's id for it).
    Held(u64),
    /// The listener is at its cap: answered 503.
    OverCap,
    /// Its source holds its share: answered 503.
    OverShare(Source),
    /// Its source holds its share and as many wait for that answer:
    /// closed unanswered.
    Closed,
}

/// The book's answer to a new connection: what it is, and the connection
/// shed to make room for it (`T`: how the caller closes one).
#[derive(Debug)]
pub struct Verdict<T> {
    pub admission: Admission,
    pub shed: Option<T>,
}

#[derive(Debug, Default)]
struct Share {
    held: usize,
    /// Over the share, waiting for their 503.
    refusing: usize,
}

struct Entry<T> {
    source: Option<Source>,
    mark: Arc<Mark>,
    /// How to close it; `None`: it cannot be shed.
    closer: Option<T>,
}

/// See the module docs.
pub struct Book<T> {
    max: usize,
    per_source: usize,
    next_id: u64,
    /// Ids grow, so the first is the oldest.
    held: BTreeMap<u64, Entry<T>>,
    sources: HashMap<Source, Share>,
}

impl<T> Book<T> {
    pub fn new(max: usize, per_source: usize) -> Self {
        Self {
            max: max.max(1),
            per_source: per_source.max(1),
            next_id: 0,
            held: BTreeMap::new(),
            sources: HashMap::new(),
        }
    }

    pub fn set_per_source(&mut self, per_source: usize) {
        self.per_source = per_source.max(1);
    }

    /// Connections holding a place.
    #[cfg(test)]
    fn held(&self) -> usize {
        self.held.len()
    }

    /// From how many held connections on, each new one sheds one that has
    /// not authenticated: 90% of the cap.
    pub fn high_water(&self) -> usize {
        self.max - self.max / 10
    }

    /// Admits a new connection from `source` (`None`: a trusted proxy, or
    /// unknown), marked by its requests through `mark`, closed through
    /// `closer` if it is ever shed.
    pub fn admit(
        &mut self,
        source: Option<Source>,
        mark: Arc<Mark>,
        closer: Option<T>,
    ) -> Verdict<T> {
        if let Some(source) = source {
            let share = self.sources.entry(source).or_default();
            if share.held >= self.per_source {
                let admission = if share.refusing >= self.per_source {
                    Admission::Closed
                } else {
                    share.refusing += 1;
                    Admission::OverShare(source)
                };
                return Verdict {
                    admission,
                    shed: None,
                };
            }
        }
        let shed = if self.held.len() >= self.high_water() {
            self.victim().and_then(|id| self.evict(id))
        } else {
            None
        };
        if self.held.len() >= self.max {
            if let Some(source) = source {
                self.forget_if_empty(source);
            }
            return Verdict {
                admission: Admission::OverCap,
                shed,
            };
        }
        let id = self.next_id;
        self.next_id += 1;
        self.held.insert(
            id,
            Entry {
                source,
                mark,
                closer,
            },
        );
        if let Some(source) = source {
            self.sources.entry(source).or_default().held += 1;
        }
        Verdict {
            admission: Admission::Held(id),
            shed,
        }
    }

    /// A connection admitted as `admission` closed.
    pub fn release(&mut self, admission: Admission) {
        match admission {
            Admission::Held(id) => {
                let _ = self.evict(id);
            }
            Admission::OverShare(source) => {
                if let Some(share) = self.sources.get_mut(&source) {
                    share.refusing = share.refusing.saturating_sub(1);
                }
                self.forget_if_empty(source);
            }
            Admission::OverCap | Admission::Closed => {}
        }
    }

    /// The connection to shed (see the module docs).
    fn victim(&self) -> Option<u64> {
        self.held
            .iter()
            .filter(|(_, entry)| entry.closer.is_some() && !entry.mark.authenticated())
            .max_by_key(|(id, entry)| {
                let holds = entry
                    .source
                    .and_then(|source| self.sources.get(&source))
                    .map_or(0, |share| share.held);
                (!entry.mark.busy(), holds, std::cmp::Reverse(**id))
            })
            .map(|(id, _)| *id)
    }

    /// Takes the connection `id` out of the book, giving its closer.
    fn evict(&mut self, id: u64) -> Option<T> {
        let entry = self.held.remove(&id)?;
        if let Some(source) = entry.source {
            if let Some(share) = self.sources.get_mut(&source) {
                share.held = share.held.saturating_sub(1);
            }
            self.forget_if_empty(source);
        }
        entry.closer
    }

    fn forget_if_empty(&mut self, source: Source) {
        if self
            .sources
            .get(&source)
            .is_some_and(|share| share.held == 0 && share.refusing == 0)
        {
            self.sources.remove(&source);
        }
    }

    /// Sources with an entry (for tests: none is kept once its
    /// connections closed).
    #[cfg(test)]
    fn sources(&self) -> usize {
        self.sources.len()
    }
}

/// Requests in flight per forwarded client, on connections from trusted
/// proxies: behind a proxy one client's connections are the proxy's, so
/// its share is counted per request instead (a proxy holds one upstream
/// connection per request it is forwarding, so requests in flight are the
/// connections that client makes the proxy hold).
#[derive(Debug)]
pub struct InFlight {
    per_source: usize,
    counts: HashMap<Source, usize>,
}

impl InFlight {
    pub fn new(per_source: usize) -> Self {
        Self {
            per_source: per_source.max(1),
            counts: HashMap::new(),
        }
    }

    pub fn set_per_source(&mut self, per_source: usize) {
        self.per_source = per_source.max(1);
    }

    /// Counts a request of `source` in, unless it has its share in flight.
    pub fn enter(&mut self, source: Source) -> bool {
        let count = self.counts.entry(source).or_default();
        if *count >= self.per_source {
            return false;
        }
        *count += 1;
        true
    }

    /// A request [`Self::enter`] let in is done.
    pub fn leave(&mut self, source: Source) {
        if let Some(count) = self.counts.get_mut(&source) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                self.counts.remove(&source);
            }
        }
    }

    #[cfg(test)]
    fn sources(&self) -> usize {
        self.counts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    fn source(ip: &str) -> Option<Source> {
        Some(Source::of(ip.parse::<IpAddr>().unwrap()))
    }

    /// A book whose closers are the connections' names.
    fn book(max: usize, per_source: usize) -> Book<&'static str> {
        Book::new(max, per_source)
    }

    fn admit(
        book: &mut Book<&'static str>,
        from: &str,
        name: &'static str,
    ) -> (Verdict<&'static str>, Arc<Mark>) {
        let mark = Arc::new(Mark::default());
        (book.admit(source(from), mark.clone(), Some(name)), mark)
    }

    fn held(verdict: &Verdict<&'static str>) -> u64 {
        match verdict.admission {
            Admission::Held(id) => id,
            other => panic!("not held: {other:?}"),
        }
    }

    #[test]
    fn a_source_over_its_share_is_answered_then_closed_while_others_are_held() {
        let mut book = book(100, 2);
        let a1 = held(&admit(&mut book, "192.0.2.1", "a1").0);
        held(&admit(&mut book, "192.0.2.1", "a2").0);
        let over = admit(&mut book, "192.0.2.1", "a3").0.admission;
        assert_eq!(
            over,
            Admission::OverShare(Source::of("192.0.2.1".parse().unwrap()))
        );
        assert_eq!(admit(&mut book, "192.0.2.1", "a4").0.admission, over);
        // As many wait for their answer as the share: the next is closed.
        assert_eq!(
            admit(&mut book, "192.0.2.1", "a5").0.admission,
            Admission::Closed
        );
        // Another source is held; the same /64 is the same source.
        held(&admit(&mut book, "192.0.2.2", "b1").0);
        held(&admit(&mut book, "2001:db8::1", "c1").0);
        held(&admit(&mut book, "2001:db8::2", "c2").0);
        assert!(matches!(
            admit(&mut book, "2001:db8::3", "c3").0.admission,
            Admission::OverShare(_)
        ));
        // An answered one closing makes room for another answer; a held
        // one closing makes room for a held one.
        book.release(over);
        assert_eq!(admit(&mut book, "192.0.2.1", "a6").0.admission, over);
        book.release(Admission::Held(a1));
        held(&admit(&mut book, "192.0.2.1", "a7").0);
        assert_eq!(book.held(), 5);
    }

    #[test]
    fn trusted_proxies_and_unknown_peers_have_no_share() {
        let mut book = book(10, 1);
        for _ in 0..5 {
            let verdict = book.admit(None, Arc::default(), Some("proxied"));
            held(&verdict);
        }
        assert_eq!(book.held(), 5);
    }

    #[test]
    fn at_the_cap_without_anything_to_shed_a_connection_is_over() {
        let mut book = book(3, 3);
        for name in ["a", "b", "c"] {
            let (verdict, mark) = admit(&mut book, "192.0.2.1", name);
            held(&verdict);
            mark.authenticate();
        }
        let (verdict, _) = admit(&mut book, "192.0.2.9", "d");
        assert_eq!(verdict.admission, Admission::OverCap);
        assert!(verdict.shed.is_none(), "authenticated ones are never shed");
    }

    #[test]
    fn near_the_cap_new_connections_shed_unauthenticated_ones_never_authenticated_ones() {
        // High water: 18 of 20.
        let mut book = book(20, 10);
        assert_eq!(book.high_water(), 18);
        for name in ["t0", "t1", "t2", "t3"] {
            let (verdict, mark) = admit(&mut book, "192.0.2.100", name);
            held(&verdict);
            mark.authenticate();
        }
        // Slow clients: 10 from one source, 4 from another.
        for name in ["f0", "f1", "f2", "f3", "f4", "f5", "f6", "f7", "f8", "f9"] {
            held(&admit(&mut book, "198.51.100.1", name).0);
        }
        for name in ["g0", "g1", "g2", "g3"] {
            held(&admit(&mut book, "198.51.100.2", name).0);
        }
        assert_eq!(book.held(), 18);
        // The next sheds the biggest source's oldest first.
        let (verdict, _) = admit(&mut book, "203.0.113.5", "new0");
        assert_eq!(verdict.shed, Some("f0"));
        held(&verdict);
        assert_eq!(book.held(), 18, "took the shed one's place");
        // A connection in the middle of a request goes after idle ones.
        let (verdict, busy) = admit(&mut book, "198.51.100.3", "busy");
        assert_eq!(verdict.shed, Some("f1"));
        busy.enter();
        // Until the big source is down to the other's size, it pays.
        let mut shed = Vec::new();
        for _ in 0..20 {
            let (verdict, _) = admit(&mut book, "203.0.113.6", "late");
            if matches!(verdict.admission, Admission::OverShare(_)) {
                break;
            }
            shed.push(verdict.shed.expect("something to shed"));
        }
        assert!(
            shed.starts_with(&["f2", "f3", "f4", "f5", "f6"]),
            "{shed:?}"
        );
        assert!(!shed.iter().any(|s| s.starts_with('t')), "{shed:?}");
        assert!(!shed.contains(&"busy"), "{shed:?}");
        assert_eq!(book.held(), 18);
    }

    #[test]
    fn a_connection_that_cannot_be_closed_is_not_shed() {
        let mut book = book(2, 5);
        book.admit(source("192.0.2.1"), Arc::default(), None);
        book.admit(source("192.0.2.1"), Arc::default(), None);
        let (verdict, _) = admit(&mut book, "192.0.2.2", "x");
        assert_eq!(verdict.admission, Admission::OverCap);
        assert!(verdict.shed.is_none());
    }

    #[test]
    fn released_connections_leave_nothing_behind() {
        let mut book = book(4, 1);
        let (a, _) = admit(&mut book, "192.0.2.1", "a");
        let (b, _) = admit(&mut book, "192.0.2.1", "b");
        let (c, _) = admit(&mut book, "192.0.2.1", "c");
        let (d, _) = admit(&mut book, "192.0.2.2", "d");
        for verdict in [a, b, c, d] {
            book.release(verdict.admission);
        }
        assert_eq!(book.held(), 0);
        assert_eq!(book.sources(), 0);
        // Released twice (shed, then closed): counted once.
        let (a, _) = admit(&mut book, "192.0.2.1", "a");
        book.release(a.admission);
        book.release(a.admission);
        assert_eq!(book.held(), 0);
    }

    #[test]
    fn forwarded_clients_get_their_share_of_requests_in_flight() {
        let mut in_flight = InFlight::new(2);
        let client = source("203.0.113.7").unwrap();
        let other = source("203.0.113.8").unwrap();
        assert!(in_flight.enter(client));
        assert!(in_flight.enter(client));
        assert!(!in_flight.enter(client), "a third at once is over");
        assert!(in_flight.enter(other));
        in_flight.leave(client);
        assert!(in_flight.enter(client), "a finished request makes room");
        in_flight.leave(client);
        in_flight.leave(client);
        in_flight.leave(other);
        assert_eq!(in_flight.sources(), 0);
    }
}
