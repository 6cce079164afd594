//! Admin JWTs: who may issue, list and revoke grants, and for which tenants.
//!
//! Claims: `sub`, `role` (`platform-admin` | `tenant-admin` | `approver` |
//! `viewer`), `tenant` (required for all but `platform-admin`; absent means every
//! tenant, which only a `platform-admin` may have), `iss`, `aud`, `exp`,
//! `nbf`, `iat`. Exactly one algorithm is accepted per verifier (HS256,
//! RS256 or EdDSA), fixed by configuration and never taken from the token,
//! so neither `alg: none` nor algorithm confusion can get through.
//!
//! Error messages never contain the token or any part of it.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use corkboard_board::TenantId;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use thiserror::Error;

pub const DEFAULT_ISSUER: &str = "corkboard";
pub const DEFAULT_AUDIENCE: &str = "corkboard-admin";
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(30);
/// Clock skew tolerated at most: more would keep expired tokens alive.
pub const MAX_LEEWAY: Duration = Duration::from_secs(300);
/// Shortest HS256 secret accepted (RFC 7518 §3.2: at least the hash size).
pub const MIN_SECRET_BYTES: usize = 32;
/// Longest lifetime [`AdminMinter`] gives a token.
pub const MAX_ADMIN_TTL: Duration = Duration::from_secs(365 * 24 * 3600);

/// Why an admin token was refused, or a key could not be used.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum JwtError {
    #[error("missing admin token: send `Authorization: Bearer <admin JWT>`")]
    Missing,
    #[error("malformed admin token: {0}")]
    Malformed(&'static str),
    #[error("admin token is not signed with the accepted algorithm ({expected})")]
    WrongAlgorithm { expected: &'static str },
    #[error("admin token signature is invalid (signed with another key, or altered)")]
    BadSignature,
    #[error("admin token has expired")]
    Expired,
    #[error("admin token is not valid yet (nbf is in the future)")]
    NotYetValid,
    #[error("admin token has the wrong issuer (expected {expected:?})")]
    WrongIssuer { expected: String },
    #[error("admin token has the wrong audience (expected {expected:?})")]
    WrongAudience { expected: String },
    #[error("admin token claims are invalid: {0}")]
    BadClaims(String),
    /// A key, secret or setting is unusable (start-up, not per request).
    #[error("admin JWT configuration: {0}")]
    Config(String),
}

/// What an admin may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AdminRole {
    /// Manages grants of every tenant (or of its `tenant` claim, if set).
    PlatformAdmin,
    /// Manages grants of one tenant.
    TenantAdmin,
    /// Reads one tenant's grants and board.
    Viewer,
    /// Reads one tenant like a viewer, and decides its calls awaiting a
    /// person's approval; changes nothing else.
    Approver,
}

impl AdminRole {
    pub const ALL: [AdminRole; 4] = [
        Self::PlatformAdmin,
        Self::TenantAdmin,
        Self::Viewer,
        Self::Approver,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::PlatformAdmin => "platform-admin",
            Self::TenantAdmin => "tenant-admin",
            Self::Viewer => "viewer",
            Self::Approver => "approver",
        }
    }
}

impl fmt::Display for AdminRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for AdminRole {
    type Err = JwtError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| {
                JwtError::BadClaims(
                    "unknown role; expected platform-admin, tenant-admin, approver or viewer"
                        .into(),
                )
            })
    }
}

/// A verified admin token: who, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifiedAdmin {
    pub principal: AdminPrincipal,
    /// The token's `exp`, Unix seconds, rounded down: a non-integer `exp`
    /// (RFC 7519 allows one) is honoured, never ignored, and nothing
    /// derived from the token outlives it.
    pub expires_at: u64,
}

/// A verified admin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdminPrincipal {
    pub subject: String,
    pub role: AdminRole,
    /// `None`: every tenant (only ever for [`AdminRole::PlatformAdmin`]).
    pub tenant: Option<TenantId>,
}

impl AdminPrincipal {
    /// May see `tenant`'s grants and board.
    pub fn can_read(&self, tenant: &TenantId) -> bool {
        match &self.tenant {
            Some(own) => own == tenant,
            None => self.role == AdminRole::PlatformAdmin,
        }
    }

    /// May issue and revoke `tenant`'s grants, and act on its board.
    pub fn can_manage(&self, tenant: &TenantId) -> bool {
        matches!(self.role, AdminRole::PlatformAdmin | AdminRole::TenantAdmin)
            && self.can_read(tenant)
    }

    /// May approve or deny `tenant`'s calls awaiting a person: its admins
    /// and its approvers (never a run: runs hold grants, not admin roles).
    pub fn can_decide(&self, tenant: &TenantId) -> bool {
        (self.role == AdminRole::Approver || self.can_manage(tenant)) && self.can_read(tenant)
    }

    /// May act on every tenant (listing tenants, cross-tenant views).
    pub fn is_all_tenants(&self) -> bool {
        self.role == AdminRole::PlatformAdmin && self.tenant.is_none()
    }
}

/// The key a verifier checks signatures with. `Debug` never shows it.
#[derive(Clone)]
pub enum VerifyingKey {
    /// Shared secret for HS256.
    Hs256Secret(Vec<u8>),
    /// RSA public key (`-----BEGIN PUBLIC KEY-----` or PKCS#1) for RS256.
    Rs256PublicPem(Vec<u8>),
    /// Ed25519 public key (`-----BEGIN PUBLIC KEY-----`) for EdDSA.
    EdDsaPublicPem(Vec<u8>),
}

impl VerifyingKey {
    /// Reads an HS256 secret file (trailing line breaks are not part of it).
    pub fn hs256_secret_file(path: &Path) -> Result<Self, JwtError> {
        read_secret_file(path).map(Self::Hs256Secret)
    }

    pub fn rs256_public_pem_file(path: &Path) -> Result<Self, JwtError> {
        read_key_file(path).map(Self::Rs256PublicPem)
    }

    pub fn eddsa_public_pem_file(path: &Path) -> Result<Self, JwtError> {
        read_key_file(path).map(Self::EdDsaPublicPem)
    }

    fn algorithm(&self) -> Algorithm {
        match self {
            Self::Hs256Secret(_) => Algorithm::HS256,
            Self::Rs256PublicPem(_) => Algorithm::RS256,
            Self::EdDsaPublicPem(_) => Algorithm::EdDSA,
        }
    }

    fn decoding_key(&self) -> Result<DecodingKey, JwtError> {
        match self {
            Self::Hs256Secret(secret) => {
                check_secret(secret)?;
                Ok(DecodingKey::from_secret(secret))
            }
            Self::Rs256PublicPem(pem) => DecodingKey::from_rsa_pem(pem)
                .map_err(|e| JwtError::Config(format!("not an RSA public key PEM: {e}"))),
            Self::EdDsaPublicPem(pem) => DecodingKey::from_ed_pem(pem)
                .map_err(|e| JwtError::Config(format!("not an Ed25519 public key PEM: {e}"))),
        }
    }
}

impl fmt::Debug for VerifyingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "VerifyingKey({}, <redacted>)",
            alg_name(self.algorithm())
        )
    }
}

/// The key a minter signs with. `Debug` never shows it.
#[derive(Clone)]
pub enum SigningKey {
    Hs256Secret(Vec<u8>),
    /// RSA private key PEM (PKCS#1 or PKCS#8) for RS256.
    Rs256PrivatePem(Vec<u8>),
    /// Ed25519 private key PEM (PKCS#8) for EdDSA.
    EdDsaPrivatePem(Vec<u8>),
}

impl SigningKey {
    /// Reads an HS256 secret file (trailing line breaks are not part of it).
    pub fn hs256_secret_file(path: &Path) -> Result<Self, JwtError> {
        read_secret_file(path).map(Self::Hs256Secret)
    }

    pub fn rs256_private_pem_file(path: &Path) -> Result<Self, JwtError> {
        read_key_file(path).map(Self::Rs256PrivatePem)
    }

    pub fn eddsa_private_pem_file(path: &Path) -> Result<Self, JwtError> {
        read_key_file(path).map(Self::EdDsaPrivatePem)
    }

    fn algorithm(&self) -> Algorithm {
        match self {
            Self::Hs256Secret(_) => Algorithm::HS256,
            Self::Rs256PrivatePem(_) => Algorithm::RS256,
            Self::EdDsaPrivatePem(_) => Algorithm::EdDSA,
        }
    }

    fn encoding_key(&self) -> Result<EncodingKey, JwtError> {
        match self {
            Self::Hs256Secret(secret) => {
                check_secret(secret)?;
                Ok(EncodingKey::from_secret(secret))
            }
            Self::Rs256PrivatePem(pem) => EncodingKey::from_rsa_pem(pem)
                .map_err(|e| JwtError::Config(format!("not an RSA private key PEM: {e}"))),
            Self::EdDsaPrivatePem(pem) => EncodingKey::from_ed_pem(pem)
                .map_err(|e| JwtError::Config(format!("not an Ed25519 private key PEM: {e}"))),
        }
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey({}, <redacted>)", alg_name(self.algorithm()))
    }
}

/// How admin tokens are checked.
#[derive(Debug, Clone)]
pub struct AdminVerifierConfig {
    pub key: VerifyingKey,
    /// Keys `key` replaced, still accepted (same algorithm) so that a key
    /// rotates without refusing the tokens already handed out: list the
    /// old key here until the last token it signed has expired.
    pub previous: Vec<VerifyingKey>,
    pub issuer: String,
    pub audience: String,
    /// Tolerated clock skew for `exp`, `nbf` and `iat`; at most [`MAX_LEEWAY`].
    pub leeway: Duration,
}

impl AdminVerifierConfig {
    /// Default issuer, audience and leeway.
    pub fn new(key: VerifyingKey) -> Self {
        Self {
            key,
            previous: Vec::new(),
            issuer: DEFAULT_ISSUER.into(),
            audience: DEFAULT_AUDIENCE.into(),
            leeway: DEFAULT_LEEWAY,
        }
    }
}

/// Checks admin tokens. Build once at start-up; `verify` is cheap.
#[derive(Clone)]
pub struct AdminVerifier {
    /// The current key first, then the previous ones.
    keys: Vec<DecodingKey>,
    algorithm: Algorithm,
    validation: Validation,
    issuer: String,
    audience: String,
    leeway_secs: u64,
}

impl fmt::Debug for AdminVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminVerifier")
            .field("algorithm", &alg_name(self.algorithm))
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("leeway_secs", &self.leeway_secs)
            .finish_non_exhaustive()
    }
}

impl AdminVerifier {
    pub fn new(config: AdminVerifierConfig) -> Result<Self, JwtError> {
        if config.leeway > MAX_LEEWAY {
            return Err(JwtError::Config(format!(
                "leeway {:?} exceeds the maximum of {:?}",
                config.leeway, MAX_LEEWAY
            )));
        }
        if config.issuer.is_empty() || config.audience.is_empty() {
            return Err(JwtError::Config(
                "issuer and audience must not be empty".into(),
            ));
        }
        let algorithm = config.key.algorithm();
        let mut keys = vec![config.key.decoding_key()?];
        for previous in &config.previous {
            if previous.algorithm() != algorithm {
                return Err(JwtError::Config(format!(
                    "a previous key is for {}, the current one for {}: a rotation keeps the algorithm",
                    alg_name(previous.algorithm()),
                    alg_name(algorithm)
                )));
            }
            keys.push(previous.decoding_key()?);
        }
        let leeway_secs = config.leeway.as_secs();
        let mut validation = Validation::new(algorithm);
        validation.leeway = leeway_secs;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.set_issuer(&[config.issuer.as_str()]);
        validation.set_audience(&[config.audience.as_str()]);
        validation.set_required_spec_claims(&["exp", "nbf", "iss", "aud", "sub"]);
        Ok(Self {
            keys,
            algorithm,
            validation,
            issuer: config.issuer,
            audience: config.audience,
            leeway_secs,
        })
    }

    /// Checks signature, algorithm, `exp`, `nbf`, `iat`, `iss`, `aud` and
    /// the role/tenant combination.
    pub fn verify(&self, token: &str) -> Result<AdminPrincipal, JwtError> {
        self.verify_with_expiry(token)
            .map(|verified| verified.principal)
    }

    /// [`verify`](Self::verify), also answering when the token expires, so
    /// that what is derived from it (a web session) ends no later.
    pub fn verify_with_expiry(&self, token: &str) -> Result<VerifiedAdmin, JwtError> {
        let token = token.trim();
        if token.is_empty() {
            return Err(JwtError::Missing);
        }
        self.check_header(token)?;
        // The current key, then each previous one while the signature is
        // what fails: any other refusal is the token's, whatever the key.
        let mut decoded = Err(JwtError::BadSignature);
        for key in &self.keys {
            decoded = jsonwebtoken::decode::<Claims>(token, key, &self.validation)
                .map_err(|e| self.map_error(e.kind()));
            if !matches!(decoded, Err(JwtError::BadSignature)) {
                break;
            }
        }
        let data = decoded?;
        let claims = data.claims;
        let iat = claims
            .iat
            .ok_or_else(|| JwtError::BadClaims("missing iat".into()))?;
        if iat > unix_now().saturating_add(self.leeway_secs) {
            return Err(JwtError::BadClaims("iat is in the future".into()));
        }
        if claims.sub.trim().is_empty() {
            return Err(JwtError::BadClaims("sub must not be empty".into()));
        }
        let role: AdminRole = claims.role.parse()?;
        let tenant = claims
            .tenant
            .map(|t| {
                TenantId::parse(t).map_err(|e| JwtError::BadClaims(format!("tenant: {}", e.reason)))
            })
            .transpose()?;
        check_role_tenant(role, tenant.as_ref())?;
        Ok(VerifiedAdmin {
            principal: AdminPrincipal {
                subject: claims.sub,
                role,
                tenant,
            },
            expires_at: claims.exp.0,
        })
    }

    /// Reads the header ourselves before anything else, so that a token
    /// with another algorithm (`none` included, which the library cannot
    /// even parse) gets a precise refusal.
    fn check_header(&self, token: &str) -> Result<(), JwtError> {
        #[derive(Deserialize)]
        struct RawHeader {
            alg: Option<String>,
        }
        let mut parts = token.split('.');
        let (Some(header), Some(_), Some(_), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(JwtError::Malformed(
                "expected three base64url parts separated by '.'",
            ));
        };
        let bytes = URL_SAFE_NO_PAD
            .decode(header)
            .map_err(|_| JwtError::Malformed("header is not base64url"))?;
        let header: RawHeader = serde_json::from_slice(&bytes)
            .map_err(|_| JwtError::Malformed("header is not a JSON object"))?;
        match header.alg.as_deref() {
            Some(alg) if alg == alg_name(self.algorithm) => Ok(()),
            _ => Err(JwtError::WrongAlgorithm {
                expected: alg_name(self.algorithm),
            }),
        }
    }

    fn map_error(&self, kind: &ErrorKind) -> JwtError {
        match kind {
            ErrorKind::InvalidSignature
            | ErrorKind::InvalidRsaKey(_)
            | ErrorKind::InvalidEddsaKey
            | ErrorKind::InvalidEcdsaKey
            | ErrorKind::InvalidKeyFormat => JwtError::BadSignature,
            ErrorKind::InvalidAlgorithm
            | ErrorKind::InvalidAlgorithmName
            | ErrorKind::MissingAlgorithm => JwtError::WrongAlgorithm {
                expected: alg_name(self.algorithm),
            },
            ErrorKind::ExpiredSignature => JwtError::Expired,
            ErrorKind::ImmatureSignature => JwtError::NotYetValid,
            ErrorKind::InvalidIssuer => JwtError::WrongIssuer {
                expected: self.issuer.clone(),
            },
            ErrorKind::InvalidAudience => JwtError::WrongAudience {
                expected: self.audience.clone(),
            },
            ErrorKind::MissingRequiredClaim(claim) => {
                JwtError::BadClaims(format!("missing {}", known_claim(claim)))
            }
            ErrorKind::InvalidClaimFormat(claim) => {
                JwtError::BadClaims(format!("{} has the wrong type", known_claim(claim)))
            }
            // Only reached after the signature was verified: the signer
            // produced claims of the wrong shape.
            ErrorKind::Json(_) => JwtError::BadClaims(
                "expected sub, role, optional tenant (strings) and numeric exp, nbf, iat".into(),
            ),
            ErrorKind::Base64(_) | ErrorKind::Utf8(_) | ErrorKind::InvalidToken => {
                JwtError::Malformed("not a well-formed JWT")
            }
            _ => JwtError::Malformed("the token could not be verified"),
        }
    }
}

/// Mints admin tokens (`corkboard admin token`, tests).
#[derive(Clone)]
pub struct AdminMinter {
    key: EncodingKey,
    algorithm: Algorithm,
    issuer: String,
    audience: String,
}

impl fmt::Debug for AdminMinter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AdminMinter")
            .field("algorithm", &alg_name(self.algorithm))
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .finish_non_exhaustive()
    }
}

impl AdminMinter {
    /// A minter with the default issuer and audience.
    pub fn new(key: SigningKey) -> Result<Self, JwtError> {
        Self::with_issuer_audience(key, DEFAULT_ISSUER, DEFAULT_AUDIENCE)
    }

    pub fn with_issuer_audience(
        key: SigningKey,
        issuer: impl Into<String>,
        audience: impl Into<String>,
    ) -> Result<Self, JwtError> {
        Ok(Self {
            algorithm: key.algorithm(),
            key: key.encoding_key()?,
            issuer: issuer.into(),
            audience: audience.into(),
        })
    }

    /// A token for `subject` valid from now for `ttl` (whole seconds,
    /// rounded up). Refuses the role/tenant combinations the verifier
    /// refuses.
    pub fn mint(
        &self,
        subject: &str,
        role: AdminRole,
        tenant: Option<&TenantId>,
        ttl: Duration,
    ) -> Result<String, JwtError> {
        if subject.trim().is_empty() {
            return Err(JwtError::BadClaims("sub must not be empty".into()));
        }
        if ttl.is_zero() || ttl > MAX_ADMIN_TTL {
            return Err(JwtError::BadClaims(format!(
                "ttl must be between 1s and {}d",
                MAX_ADMIN_TTL.as_secs() / 86_400
            )));
        }
        check_role_tenant(role, tenant)?;
        let now = unix_now();
        let ttl_secs = ttl.as_secs() + u64::from(ttl.subsec_nanos() > 0);
        let claims = MintedClaims {
            sub: subject,
            role: role.as_str(),
            tenant: tenant.map(TenantId::as_str),
            iss: &self.issuer,
            aud: &self.audience,
            exp: now + ttl_secs,
            nbf: now,
            iat: now,
        };
        let mut header = Header::new(self.algorithm);
        header.typ = Some("JWT".into());
        jsonwebtoken::encode(&header, &claims, &self.key)
            .map_err(|e| JwtError::Config(format!("cannot sign: {e}")))
    }
}

/// Claims as read (iss/aud/exp/nbf are checked by the library).
#[derive(Deserialize)]
struct Claims {
    sub: String,
    role: String,
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    iat: Option<u64>,
    /// Required and range-checked by the library too (which rounds a
    /// fractional one); read here for the caller, rounded down.
    exp: NumericDate,
}

/// A JWT NumericDate (RFC 7519 §2): seconds since the epoch, integer or
/// not. A fractional value is rounded down, so the time kept is never
/// later than the token's.
struct NumericDate(u64);

impl<'de> Deserialize<'de> for NumericDate {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = NumericDate;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a non-negative number of seconds since the epoch")
            }
            fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<NumericDate, E> {
                Ok(NumericDate(value))
            }
            fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<NumericDate, E> {
                u64::try_from(value)
                    .map(NumericDate)
                    .map_err(|_| E::custom("a NumericDate must not be negative"))
            }
            fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<NumericDate, E> {
                if value.is_finite() && value >= 0.0 && value < u64::MAX as f64 {
                    // Truncation is the point: round down, never up.
                    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                    Ok(NumericDate(value.floor() as u64))
                } else {
                    Err(E::custom(
                        "a NumericDate must be a finite non-negative number",
                    ))
                }
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

#[derive(Serialize)]
struct MintedClaims<'a> {
    sub: &'a str,
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tenant: Option<&'a str>,
    iss: &'a str,
    aud: &'a str,
    exp: u64,
    nbf: u64,
    iat: u64,
}

fn check_role_tenant(role: AdminRole, tenant: Option<&TenantId>) -> Result<(), JwtError> {
    if tenant.is_none() && role != AdminRole::PlatformAdmin {
        return Err(JwtError::BadClaims(format!(
            "role {role} requires a tenant claim"
        )));
    }
    Ok(())
}

fn check_secret(secret: &[u8]) -> Result<(), JwtError> {
    if secret.len() < MIN_SECRET_BYTES {
        return Err(JwtError::Config(format!(
            "the HS256 secret must be at least {MIN_SECRET_BYTES} bytes"
        )));
    }
    Ok(())
}

fn read_key_file(path: &Path) -> Result<Vec<u8>, JwtError> {
    std::fs::read(path)
        .map_err(|e| JwtError::Config(format!("cannot read key file {}: {e}", path.display())))
}

fn read_secret_file(path: &Path) -> Result<Vec<u8>, JwtError> {
    let mut bytes = read_key_file(path)?;
    // Files written by editors and `echo` end with a line break that is not
    // meant to be part of the secret.
    while bytes.last().is_some_and(|b| *b == b'\n' || *b == b'\r') {
        bytes.pop();
    }
    check_secret(&bytes)?;
    Ok(bytes)
}

fn alg_name(alg: Algorithm) -> &'static str {
    match alg {
        Algorithm::HS256 => "HS256",
        Algorithm::RS256 => "RS256",
        Algorithm::EdDSA => "EdDSA",
        _ => "unsupported",
    }
}

/// Claim names from the library, limited to the ones we require so that no
/// unexpected text ends up in a message.
fn known_claim(name: &str) -> &'static str {
    ["exp", "nbf", "iss", "aud", "sub", "iat"]
        .into_iter()
        .find(|c| *c == name)
        .unwrap_or("a required claim")
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// Every admin-token refusal is an authentication failure.
impl corkboard_board::ErrorCode for JwtError {
    fn error_code(&self) -> corkboard_board::Code {
        corkboard_board::Code::Unauthenticated
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenant(t: &str) -> TenantId {
        TenantId::parse(t).unwrap()
    }

    #[test]
    fn permissions_follow_role_and_tenant() {
        let platform = AdminPrincipal {
            subject: "p".into(),
            role: AdminRole::PlatformAdmin,
            tenant: None,
        };
        let scoped_platform = AdminPrincipal {
            tenant: Some(tenant("a")),
            ..platform.clone()
        };
        let admin = AdminPrincipal {
            subject: "t".into(),
            role: AdminRole::TenantAdmin,
            tenant: Some(tenant("a")),
        };
        let viewer = AdminPrincipal {
            role: AdminRole::Viewer,
            ..admin.clone()
        };
        let (a, b) = (tenant("a"), tenant("b"));
        assert!(platform.can_manage(&a) && platform.can_manage(&b) && platform.is_all_tenants());
        assert!(scoped_platform.can_manage(&a) && !scoped_platform.can_read(&b));
        assert!(!scoped_platform.is_all_tenants());
        assert!(admin.can_manage(&a) && !admin.can_read(&b) && !admin.can_manage(&b));
        assert!(viewer.can_read(&a) && !viewer.can_manage(&a) && !viewer.can_read(&b));
        // A tenantless principal that is not a platform admin (never built
        // by `verify`) gets nothing.
        let odd = AdminPrincipal {
            tenant: None,
            ..admin
        };
        assert!(!odd.can_read(&a));
    }

    #[test]
    fn roles_round_trip() {
        for role in AdminRole::ALL {
            assert_eq!(role.as_str().parse::<AdminRole>().unwrap(), role);
        }
        assert!("root".parse::<AdminRole>().is_err());
    }

    fn hs256(byte: u8) -> VerifyingKey {
        VerifyingKey::Hs256Secret(vec![byte; 32])
    }

    fn minted(byte: u8) -> String {
        AdminMinter::new(SigningKey::Hs256Secret(vec![byte; 32]))
            .unwrap()
            .mint(
                "ops",
                AdminRole::PlatformAdmin,
                None,
                Duration::from_secs(60),
            )
            .unwrap()
    }

    #[test]
    fn a_token_signed_with_a_previous_key_is_accepted_and_an_unlisted_key_is_not() {
        let mut config = AdminVerifierConfig::new(hs256(2));
        config.previous = vec![hs256(1)];
        let rotated = AdminVerifier::new(config).unwrap();
        rotated.verify(&minted(1)).expect("previous key");
        rotated.verify(&minted(2)).expect("current key");
        assert!(matches!(
            rotated.verify(&minted(3)),
            Err(JwtError::BadSignature)
        ));
        // Without the previous key listed, its tokens are refused.
        let current_only = AdminVerifier::new(AdminVerifierConfig::new(hs256(2))).unwrap();
        assert!(matches!(
            current_only.verify(&minted(1)),
            Err(JwtError::BadSignature)
        ));
        // A rotation keeps the algorithm.
        let mut config = AdminVerifierConfig::new(hs256(2));
        config.previous = vec![VerifyingKey::Rs256PublicPem(Vec::new())];
        assert!(matches!(
            AdminVerifier::new(config),
            Err(JwtError::Config(_))
        ));
    }

    #[test]
    fn short_secrets_and_large_leeway_are_refused() {
        let err = AdminVerifier::new(AdminVerifierConfig::new(VerifyingKey::Hs256Secret(
            b"short".to_vec(),
        )))
        .unwrap_err();
        assert!(matches!(err, JwtError::Config(_)), "{err}");
        let mut config = AdminVerifierConfig::new(VerifyingKey::Hs256Secret(vec![7; 32]));
        config.leeway = Duration::from_secs(301);
        assert!(matches!(
            AdminVerifier::new(config).unwrap_err(),
            JwtError::Config(_)
        ));
        let debug = format!("{:?}", VerifyingKey::Hs256Secret(b"abcdefgh".repeat(4)));
        assert!(!debug.contains("abcdefgh"), "{debug}");
    }
}
