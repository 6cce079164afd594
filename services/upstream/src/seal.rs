//! Sealing upstream credentials at rest: ChaCha20-Poly1305 (`ring`, which
//! the build already has for TLS) under a key derived with HKDF-SHA256
//! from the secret file (`upstream_key_file`, created 0600 like the other
//! secrets). The tenant, upstream name, header name and URL are the
//! associated data, so a sealed value copied to another upstream or
//! tenant, or left in place under a rewritten URL or header, does not open:
//! the credential must be given again, and it is never sent to an address
//! it was not registered for. Layout: a version byte, 12-byte random
//! nonce, ciphertext + tag. Credentials are version `2` (bound to the
//! URL); version `1` credentials, sealed before the URL was bound, are
//! refused (opening them could send them wherever a rewritten URL points),
//! so such upstreams are registered again once. Webhook secrets are
//! version `1`, bound to their tenant.

use crate::error::UpstreamError;
use corkboard_board::{
    HeaderName, SealedCredential, TenantId, UpstreamName, UpstreamUrl, WebhookSecret,
};
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use std::fmt;

/// Webhook secrets (bound to the tenant).
const VERSION: u8 = 1;
/// Upstream credentials, bound to tenant, name, header and URL.
const CREDENTIAL_VERSION: u8 = 2;
const NONCE_LEN: usize = 12;
/// The longest credential value (a header value), in bytes.
pub const CREDENTIAL_MAX: usize = 4096;
/// The shortest secret a key is derived from (the file holds 64 hex chars).
const SECRET_MIN: usize = 32;

/// A credential in clear: only ever in memory, on its way into a header.
/// `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential(String);

impl Credential {
    /// A header value: 1-4096 visible ASCII characters or spaces (what
    /// every HTTP stack accepts), so it cannot split a header.
    pub fn parse(text: String) -> Result<Self, UpstreamError> {
        let ok = !text.is_empty()
            && text.len() <= CREDENTIAL_MAX
            && text.bytes().all(|b| b == b' ' || b.is_ascii_graphic());
        if ok {
            Ok(Self(text))
        } else {
            Err(UpstreamError::Invalid(
                corkboard_board::ValidationError::new(
                    "credential",
                    format!(
                        "a credential is 1-{CREDENTIAL_MAX} visible ASCII characters (a header value)"
                    ),
                ),
            ))
        }
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credential(<redacted>)")
    }
}

/// The key upstream credentials are sealed with, and the keys it
/// replaced: the newest seals, every listed key opens, so the key rotates
/// without registering every upstream again (list the old secret in
/// `upstream_previous_key_files` until nothing sealed with it is left).
pub struct CredentialKey {
    /// Newest first; never empty.
    keys: Vec<LessSafeKey>,
    rng: SystemRandom,
}

impl fmt::Debug for CredentialKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CredentialKey(<redacted>)")
    }
}

/// HKDF output length for the AEAD key.
struct KeyLen;

impl ring::hkdf::KeyType for KeyLen {
    fn len(&self) -> usize {
        CHACHA20_POLY1305.key_len()
    }
}

impl CredentialKey {
    /// Derives the key from a secret file's contents (at least 32 bytes).
    pub fn from_secret(secret: &[u8]) -> Result<Self, UpstreamError> {
        Ok(Self {
            keys: vec![Self::derive(secret)?],
            rng: SystemRandom::new(),
        })
    }

    /// This key, still opening what was sealed under `previous` secrets
    /// (each at least 32 bytes).
    pub fn with_previous<'a>(
        mut self,
        previous: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<Self, UpstreamError> {
        for secret in previous {
            self.keys.push(Self::derive(secret)?);
        }
        Ok(self)
    }

    fn derive(secret: &[u8]) -> Result<LessSafeKey, UpstreamError> {
        if secret.len() < SECRET_MIN {
            return Err(UpstreamError::Key(format!(
                "the upstream key secret has {} bytes; at least {SECRET_MIN} are needed",
                secret.len()
            )));
        }
        let salt =
            ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, b"corkboard upstream credentials");
        let mut bytes = [0u8; 32];
        salt.extract(secret)
            .expand(&[b"chacha20-poly1305 v1"], KeyLen)
            .and_then(|okm| okm.fill(&mut bytes))
            .map_err(|_| UpstreamError::Key("key derivation failed".into()))?;
        let unbound = UnboundKey::new(&CHACHA20_POLY1305, &bytes)
            .map_err(|_| UpstreamError::Key("bad key length".into()))?;
        Ok(LessSafeKey::new(unbound))
    }

    /// Seals `credential` for `tenant`'s upstream `name` at `url`, sent in
    /// `header`.
    pub fn seal(
        &self,
        tenant: &TenantId,
        name: &UpstreamName,
        header: &HeaderName,
        url: &UpstreamUrl,
        credential: &Credential,
    ) -> Result<SealedCredential, UpstreamError> {
        let sealed = self.seal_bytes(
            CREDENTIAL_VERSION,
            &associated(tenant, name, header, url),
            credential.0.as_bytes(),
        )?;
        Ok(SealedCredential::from_bytes(sealed))
    }

    /// `version`, nonce, ciphertext and tag of `clear` bound to `aad`.
    fn seal_bytes(&self, version: u8, aad: &[u8], clear: &[u8]) -> Result<Vec<u8>, UpstreamError> {
        let mut nonce = [0u8; NONCE_LEN];
        self.rng
            .fill(&mut nonce)
            .map_err(|_| UpstreamError::Key("the system random source failed".into()))?;
        let mut sealed = clear.to_vec();
        self.keys[0]
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut sealed,
            )
            .map_err(|_| UpstreamError::Key("sealing failed".into()))?;
        let mut out = Vec::with_capacity(1 + NONCE_LEN + sealed.len());
        out.push(version);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// What [`Self::seal_bytes`] sealed as `version` under the same `aad`,
    /// or none.
    fn open_bytes(&self, version: u8, aad: &[u8], bytes: &[u8]) -> Option<Vec<u8>> {
        if bytes.len() < 1 + NONCE_LEN || bytes[0] != version {
            return None;
        }
        let nonce: [u8; NONCE_LEN] = bytes[1..=NONCE_LEN].try_into().ok()?;
        // Any listed key: what was sealed before a rotation still opens.
        self.keys.iter().find_map(|key| {
            let mut buf = bytes[1 + NONCE_LEN..].to_vec();
            key.open_in_place(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(aad),
                &mut buf,
            )
            .ok()
            .map(|clear| clear.to_vec())
        })
    }

    /// Seals a webhook signing secret of `tenant` for the store (the same
    /// key and cipher as upstream credentials, bound to the tenant).
    pub fn seal_webhook_secret(
        &self,
        tenant: &TenantId,
        secret: &WebhookSecret,
    ) -> Result<WebhookSecret, UpstreamError> {
        let sealed = self.seal_bytes(
            VERSION,
            &webhook_associated(tenant),
            secret.expose().as_bytes(),
        )?;
        Ok(WebhookSecret::from_sealed_bytes(&sealed))
    }

    /// The clear secret a delivery is signed with: a sealed one opened, a
    /// clear one (stored before sealing, or without a key) as it is.
    pub fn open_webhook_secret(
        &self,
        tenant: &TenantId,
        stored: &WebhookSecret,
    ) -> Result<WebhookSecret, UpstreamError> {
        let Some(bytes) = stored.sealed_bytes() else {
            return Ok(stored.clone());
        };
        self.open_bytes(VERSION, &webhook_associated(tenant), &bytes)
            .and_then(|clear| String::from_utf8(clear).ok())
            .and_then(|text| WebhookSecret::parse(text).ok())
            .ok_or_else(|| {
                UpstreamError::Key(
                    "a webhook secret does not open with this upstream key (was upstream_key_file \
                     replaced?); register the endpoint again"
                        .into(),
                )
            })
    }

    /// Opens what [`Self::seal`] made for the same tenant, name, header and
    /// URL. Fails (naming no secret) when the key or any of those differ,
    /// and for a credential sealed before URLs were bound (version 1).
    pub fn open(
        &self,
        tenant: &TenantId,
        name: &UpstreamName,
        header: &HeaderName,
        url: &UpstreamUrl,
        sealed: &SealedCredential,
    ) -> Result<Credential, UpstreamError> {
        if sealed.as_bytes().first() == Some(&VERSION) {
            return Err(UpstreamError::Key(format!(
                "the credential of upstream {name} was sealed before credentials were bound to their URL; the credential must be given again (register the upstream again)"
            )));
        }
        let refused = || {
            UpstreamError::Key(format!(
                "the credential of upstream {name} does not open for its URL and header with this upstream key (the URL or header changed without the credential, or upstream_key_file was replaced); the credential must be given again (register the upstream again)"
            ))
        };
        let clear = self
            .open_bytes(
                CREDENTIAL_VERSION,
                &associated(tenant, name, header, url),
                sealed.as_bytes(),
            )
            .ok_or_else(refused)?;
        let text = String::from_utf8(clear).map_err(|_| refused())?;
        Credential::parse(text).map_err(|_| refused())
    }
}

/// What a sealed credential is bound to; NUL cannot occur in any part
/// (a URL has no control characters). The URL is bound as stored, so any
/// rewrite of it, however equivalent, needs the credential again.
fn associated(
    tenant: &TenantId,
    name: &UpstreamName,
    header: &HeaderName,
    url: &UpstreamUrl,
) -> Vec<u8> {
    format!(
        "{}\0{}\0{}\0{}",
        tenant.as_str(),
        name.as_str(),
        header.as_str().to_ascii_lowercase(),
        url.as_str()
    )
    .into_bytes()
}

/// What a sealed webhook secret is bound to: its tenant. The leading NUL
/// keeps it apart from every upstream credential's associated data (a
/// tenant id never starts with NUL).
fn webhook_associated(tenant: &TenantId) -> Vec<u8> {
    format!("\0webhook\0{}", tenant.as_str()).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhook_secrets_seal_per_tenant_and_clear_ones_pass_through() {
        let key = CredentialKey::from_secret(&[7u8; 64]).unwrap();
        let acme = TenantId::parse("acme").unwrap();
        let clear = WebhookSecret::parse("whsec_a-secret-of-16-bytes").unwrap();
        let sealed = key.seal_webhook_secret(&acme, &clear).unwrap();
        assert!(sealed.expose().starts_with(WebhookSecret::SEALED_PREFIX));
        assert!(!sealed.expose().contains("a-secret"), "not in clear");
        // What the stores accept and give back.
        let stored = WebhookSecret::from_stored(sealed.expose().to_owned()).unwrap();
        assert_eq!(
            key.open_webhook_secret(&acme, &stored).unwrap().expose(),
            clear.expose()
        );
        // Bound to its tenant and key.
        let globex = TenantId::parse("globex").unwrap();
        assert!(key.open_webhook_secret(&globex, &stored).is_err());
        let other = CredentialKey::from_secret(&[8u8; 64]).unwrap();
        let err = other.open_webhook_secret(&acme, &stored).unwrap_err();
        assert!(!err.to_string().contains("a-secret"), "{err}");
        // A secret stored in clear before sealing keeps working.
        let old = WebhookSecret::from_stored("an-old-clear-secret-0001").unwrap();
        assert_eq!(
            key.open_webhook_secret(&acme, &old).unwrap().expose(),
            "an-old-clear-secret-0001"
        );
        // The longest clear secret still fits once sealed.
        let long = WebhookSecret::parse("x".repeat(256)).unwrap();
        let sealed = key.seal_webhook_secret(&acme, &long).unwrap();
        assert!(WebhookSecret::from_stored(sealed.expose().to_owned()).is_ok());
    }

    fn parts() -> (TenantId, UpstreamName, HeaderName) {
        (
            TenantId::parse("acme").unwrap(),
            UpstreamName::parse("github").unwrap(),
            HeaderName::parse("Authorization").unwrap(),
        )
    }

    fn url() -> UpstreamUrl {
        UpstreamUrl::parse("https://mcp.example.com/mcp").unwrap()
    }

    #[test]
    fn a_credential_opens_only_at_the_url_and_header_it_was_sealed_for() {
        let key = CredentialKey::from_secret(&[7u8; 64]).unwrap();
        let (tenant, name, header) = parts();
        let clear = Credential::parse("Bearer ghp_secret".into()).unwrap();
        let sealed = key.seal(&tenant, &name, &header, &url(), &clear).unwrap();
        assert_eq!(
            key.open(&tenant, &name, &header, &url(), &sealed).unwrap(),
            clear
        );
        // The stored URL rewritten, the sealed value left in place.
        for moved in [
            "https://attacker.example.net/mcp",
            "https://mcp.example.com/other",
            "https://mcp.example.com/mcp?x=1",
            "http://mcp.example.com/mcp",
        ] {
            let moved = UpstreamUrl::parse(moved).unwrap();
            let err = key
                .open(&tenant, &name, &header, &moved, &sealed)
                .unwrap_err()
                .to_string();
            assert!(err.contains("must be given again"), "{err}");
            assert!(!err.contains("ghp_secret"), "{err}");
        }
        let other_header = HeaderName::parse("X-Api-Key").unwrap();
        assert!(
            key.open(&tenant, &name, &other_header, &url(), &sealed)
                .is_err()
        );
    }

    #[test]
    fn a_credential_sealed_before_urls_were_bound_is_refused() {
        let key = CredentialKey::from_secret(&[7u8; 64]).unwrap();
        let (tenant, name, header) = parts();
        // The old layout: version 1, bound to tenant, name and header only.
        let old_aad = b"acme\0github\0authorization".to_vec();
        let old = key
            .seal_bytes(VERSION, &old_aad, b"Bearer ghp_secret")
            .unwrap();
        assert_eq!(
            key.open_bytes(VERSION, &old_aad, &old).as_deref(),
            Some(&b"Bearer ghp_secret"[..]),
            "the precondition: a well-formed old seal"
        );
        let err = key
            .open(
                &tenant,
                &name,
                &header,
                &url(),
                &SealedCredential::from_bytes(old),
            )
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("sealed before credentials were bound"),
            "{err}"
        );
        assert!(err.contains("must be given again"), "{err}");
    }

    #[test]
    fn a_rotated_key_opens_what_the_previous_key_sealed_and_seals_with_the_newest() {
        let (tenant, name, header) = parts();
        let credential = Credential::parse("Bearer old".into()).unwrap();
        let old = CredentialKey::from_secret(&[1u8; 32]).unwrap();
        let before = old
            .seal(&tenant, &name, &header, &url(), &credential)
            .unwrap();
        let rotated = CredentialKey::from_secret(&[2u8; 32])
            .unwrap()
            .with_previous([&[1u8; 32][..]])
            .unwrap();
        assert_eq!(
            rotated
                .open(&tenant, &name, &header, &url(), &before)
                .unwrap(),
            credential
        );
        let after = rotated
            .seal(&tenant, &name, &header, &url(), &credential)
            .unwrap();
        let newest = CredentialKey::from_secret(&[2u8; 32]).unwrap();
        assert_eq!(
            newest
                .open(&tenant, &name, &header, &url(), &after)
                .unwrap(),
            credential,
            "sealed with the newest key"
        );
        assert!(old.open(&tenant, &name, &header, &url(), &after).is_err());
        assert!(
            CredentialKey::from_secret(&[2u8; 32])
                .unwrap()
                .with_previous([&[1u8; 31][..]])
                .is_err()
        );
    }

    #[test]
    fn seals_and_opens_bound_to_the_upstream() {
        let key = CredentialKey::from_secret(&[7u8; 64]).unwrap();
        let (tenant, name, header) = parts();
        let clear = Credential::parse("Bearer ghp_secret".into()).unwrap();
        let sealed = key.seal(&tenant, &name, &header, &url(), &clear).unwrap();
        assert!(
            !sealed.as_bytes().windows(6).any(|w| w == b"secret"),
            "the clear value is not in the sealed bytes"
        );
        assert_eq!(
            key.open(&tenant, &name, &header, &url(), &sealed).unwrap(),
            clear
        );
        let again = key.seal(&tenant, &name, &header, &url(), &clear).unwrap();
        assert_ne!(again, sealed, "a fresh nonce each time");
        let other = UpstreamName::parse("jira").unwrap();
        assert!(key.open(&tenant, &other, &header, &url(), &sealed).is_err());
        let other_tenant = TenantId::parse("globex").unwrap();
        assert!(
            key.open(&other_tenant, &name, &header, &url(), &sealed)
                .is_err()
        );
        let other_key = CredentialKey::from_secret(&[8u8; 64]).unwrap();
        let err = other_key
            .open(&tenant, &name, &header, &url(), &sealed)
            .unwrap_err();
        assert!(!err.to_string().contains("ghp_secret"));
        let mut tampered = sealed.as_bytes().to_vec();
        *tampered.last_mut().unwrap() ^= 1;
        assert!(
            key.open(
                &tenant,
                &name,
                &header,
                &url(),
                &SealedCredential::from_bytes(tampered)
            )
            .is_err()
        );
        assert_eq!(format!("{clear:?}"), "Credential(<redacted>)");
    }

    #[test]
    fn credentials_and_secrets_are_checked() {
        assert!(Credential::parse(String::new()).is_err());
        assert!(Credential::parse("a\r\nX-Evil: 1".into()).is_err());
        assert!(Credential::parse("x".repeat(CREDENTIAL_MAX + 1)).is_err());
        assert!(CredentialKey::from_secret(b"short").is_err());
    }
}
