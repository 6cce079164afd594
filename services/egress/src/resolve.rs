//! The resolver of the policy's HTTP clients: it resolves a name once,
//! keeps only the addresses the policy allows, and gives the connector
//! exactly those, so the address checked is the address connected to.
//! A name left with no allowed address fails with the [`Refusal`] of the
//! first one, which travels in the client's connect error
//! ([`crate::refusal_in`] finds it).

use crate::error::Refusal;
use crate::policy::EgressPolicy;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::net::SocketAddr;
use std::sync::Arc;

/// See the module docs.
#[derive(Debug, Clone)]
pub struct PolicyResolver {
    policy: Arc<EgressPolicy>,
}

/// A name that resolved to no address at all.
#[derive(Debug, thiserror::Error)]
#[error("{0} resolves to no address")]
struct NoAddress(String);

impl PolicyResolver {
    pub fn new(policy: Arc<EgressPolicy>) -> Self {
        Self { policy }
    }

    /// The allowed addresses of `host` (port 0: the client sets the URL's).
    pub async fn lookup(
        &self,
        host: &str,
    ) -> Result<Vec<SocketAddr>, Box<dyn std::error::Error + Send + Sync>> {
        let resolved: Vec<SocketAddr> = tokio::net::lookup_host((host, 0)).await?.collect();
        let mut refused: Option<Refusal> = None;
        let allowed: Vec<SocketAddr> = resolved
            .iter()
            .copied()
            .filter(|addr| match self.policy.check_resolved(host, addr.ip()) {
                Ok(()) => true,
                Err(refusal) => {
                    refused.get_or_insert(refusal);
                    false
                }
            })
            .collect();
        match (allowed.is_empty(), refused) {
            (false, _) => Ok(allowed),
            (true, Some(refusal)) => Err(Box::new(refusal)),
            (true, None) => Err(Box::new(NoAddress(host.to_owned()))),
        }
    }
}

impl Resolve for PolicyResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let this = self.clone();
        Box::pin(async move {
            let allowed = this.lookup(name.as_str()).await?;
            let addrs: Addrs = Box::new(allowed.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[actix_rt::test]
    async fn names_resolving_to_refused_addresses_get_no_address() {
        let resolver = PolicyResolver::new(Arc::new(EgressPolicy::default()));
        let err = resolver.lookup("localhost").await.unwrap_err();
        let refusal = err.downcast_ref::<Refusal>().expect("a refusal");
        assert!(
            refusal
                .to_string()
                .starts_with("egress refused: localhost resolves to "),
            "{refusal}"
        );
        let open = PolicyResolver::new(Arc::new(
            EgressPolicy::from_entries(&["127.0.0.0/8", "::1"]).unwrap(),
        ));
        assert!(!open.lookup("localhost").await.unwrap().is_empty());
    }

    /// A receiver on loopback; answers 200 to whatever arrives.
    fn receiver() -> (u16, std::sync::mpsc::Receiver<()>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let _ = tx.send(());
                let _ = stream.write_all(
                    b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:9/\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        });
        (port, rx)
    }

    #[actix_rt::test(system = "corkboard_testkit::MultiThread")]
    async fn the_client_refuses_at_connect_time_and_never_follows_redirects() {
        let (port, hits) = receiver();
        let strict = Arc::new(EgressPolicy::default());
        let client = strict.client_builder().build().unwrap();
        let err = client
            .get(format!("http://localhost:{port}/"))
            .send()
            .await
            .unwrap_err();
        let refusal = crate::refusal_in(&err).expect("the policy's refusal");
        assert_eq!(refusal.rule(), crate::Rule::Loopback);
        assert!(hits.try_recv().is_err(), "nothing reached the receiver");

        let open = Arc::new(EgressPolicy::from_entries(&["127.0.0.1", "::1"]).unwrap());
        let client = open.client_builder().build().unwrap();
        let response = client
            .get(format!("http://localhost:{port}/"))
            .send()
            .await
            .unwrap();
        assert_eq!(
            response.status().as_u16(),
            302,
            "the redirect is not followed"
        );
        assert!(hits.recv_timeout(std::time::Duration::from_secs(5)).is_ok());
    }
}
