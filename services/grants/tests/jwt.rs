//! Admin JWTs: every accepted shape once per algorithm, and every refusal
//! the verifier owes (expired, not yet valid, wrong issuer/audience, foreign
//! signatures, `alg: none`, algorithm confusion, tampering, inconsistent
//! role/tenant). Keys are checked in under `tests/keys/` (see its README).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use corkboard_board::TenantId;
use corkboard_grants::{
    AdminMinter, AdminPrincipal, AdminRole, AdminVerifier, AdminVerifierConfig, JwtError,
    SigningKey, VerifyingKey,
};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const SECRET: &[u8] = b"0123456789abcdef0123456789abcdef-test-secret";
const OTHER_SECRET: &[u8] = b"fedcba9876543210fedcba9876543210-other-secret";

fn key_file(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/keys")
        .join(name)
}

fn key_bytes(name: &str) -> Vec<u8> {
    std::fs::read(key_file(name)).unwrap()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn tenant(t: &str) -> TenantId {
    TenantId::parse(t).unwrap()
}

/// One configured algorithm: its verifier, its minter, and raw encoding
/// keys for crafting tokens the minter refuses to produce.
struct Suite {
    name: &'static str,
    algorithm: Algorithm,
    verifier: AdminVerifier,
    minter: AdminMinter,
    raw_key: EncodingKey,
    foreign_key: EncodingKey,
}

fn suites() -> Vec<Suite> {
    let verifier = |key: VerifyingKey| AdminVerifier::new(AdminVerifierConfig::new(key)).unwrap();
    vec![
        Suite {
            name: "HS256",
            algorithm: Algorithm::HS256,
            verifier: verifier(VerifyingKey::Hs256Secret(SECRET.to_vec())),
            minter: AdminMinter::new(SigningKey::Hs256Secret(SECRET.to_vec())).unwrap(),
            raw_key: EncodingKey::from_secret(SECRET),
            foreign_key: EncodingKey::from_secret(OTHER_SECRET),
        },
        Suite {
            name: "RS256",
            algorithm: Algorithm::RS256,
            verifier: verifier(
                VerifyingKey::rs256_public_pem_file(&key_file("rsa_a.pub.pem")).unwrap(),
            ),
            minter: AdminMinter::new(
                SigningKey::rs256_private_pem_file(&key_file("rsa_a.key.pem")).unwrap(),
            )
            .unwrap(),
            raw_key: EncodingKey::from_rsa_pem(&key_bytes("rsa_a.key.pem")).unwrap(),
            foreign_key: EncodingKey::from_rsa_pem(&key_bytes("rsa_b.key.pem")).unwrap(),
        },
        Suite {
            name: "EdDSA",
            algorithm: Algorithm::EdDSA,
            verifier: verifier(
                VerifyingKey::eddsa_public_pem_file(&key_file("ed25519_a.pub.pem")).unwrap(),
            ),
            minter: AdminMinter::new(
                SigningKey::eddsa_private_pem_file(&key_file("ed25519_a.key.pem")).unwrap(),
            )
            .unwrap(),
            raw_key: EncodingKey::from_ed_pem(&key_bytes("ed25519_a.key.pem")).unwrap(),
            foreign_key: EncodingKey::from_ed_pem(&key_bytes("ed25519_b.key.pem")).unwrap(),
        },
    ]
}

/// Claims a correct tenant admin token would carry, to be altered.
fn claims() -> Value {
    let now = now();
    json!({
        "sub": "alice",
        "role": "tenant-admin",
        "tenant": "acme",
        "iss": "corkboard",
        "aud": "corkboard-admin",
        "iat": now,
        "nbf": now,
        "exp": now + 600,
    })
}

fn with(mut claims: Value, key: &str, value: Value) -> Value {
    if value.is_null() {
        claims.as_object_mut().unwrap().remove(key);
    } else {
        claims[key] = value;
    }
    claims
}

impl Suite {
    fn sign(&self, claims: &Value) -> String {
        jsonwebtoken::encode(&Header::new(self.algorithm), claims, &self.raw_key).unwrap()
    }

    /// Verifies `token`, expecting a refusal whose message does not leak it.
    fn refuse(&self, token: &str) -> JwtError {
        let err = self
            .verifier
            .verify(token)
            .expect_err(&format!("{}: token must be refused", self.name));
        let message = err.to_string();
        for part in token.split('.').filter(|p| p.len() > 8) {
            assert!(
                !message.contains(part),
                "{}: error message leaks the token: {message}",
                self.name
            );
        }
        err
    }
}

#[test]
fn a_valid_token_per_role_is_accepted_with_every_algorithm() {
    let acme = tenant("acme");
    for suite in suites() {
        let cases = [
            (AdminRole::PlatformAdmin, None),
            (AdminRole::PlatformAdmin, Some(&acme)),
            (AdminRole::TenantAdmin, Some(&acme)),
            (AdminRole::Viewer, Some(&acme)),
        ];
        for (role, tenant) in cases {
            let token = suite
                .minter
                .mint("alice", role, tenant, Duration::from_secs(300))
                .unwrap();
            let principal = suite.verifier.verify(&token).unwrap();
            assert_eq!(
                principal,
                AdminPrincipal {
                    subject: "alice".into(),
                    role,
                    tenant: tenant.cloned(),
                },
                "{}",
                suite.name
            );
            assert!(principal.can_read(&acme));
            assert_eq!(principal.can_manage(&acme), role != AdminRole::Viewer);
        }
        // Crafted by hand too, so the claim names are pinned, not just a
        // minter/verifier round trip.
        let principal = suite.verifier.verify(&suite.sign(&claims())).unwrap();
        assert_eq!(principal.role, AdminRole::TenantAdmin);
        assert_eq!(principal.tenant, Some(acme.clone()));
        assert!(!principal.can_read(&tenant("globex")));
    }
}

#[test]
fn expired_and_not_yet_valid_tokens_are_refused() {
    let now = now();
    for suite in suites() {
        // Beyond the default 30 s leeway.
        let expired = with(claims(), "exp", json!(now - 120));
        assert_eq!(suite.refuse(&suite.sign(&expired)), JwtError::Expired);
        let future = with(claims(), "nbf", json!(now + 600));
        assert_eq!(suite.refuse(&suite.sign(&future)), JwtError::NotYetValid);
        let iat_future = with(claims(), "iat", json!(now + 600));
        assert!(matches!(
            suite.refuse(&suite.sign(&iat_future)),
            JwtError::BadClaims(_)
        ));
    }
}

#[test]
fn the_verified_expiry_is_the_tokens_exp_rounded_down_even_when_fractional() {
    let now = now();
    for suite in suites() {
        // `now` pinned in the claims too: `claims()` reads the clock again,
        // which may have ticked to the next second since.
        let whole = suite
            .verifier
            .verify_with_expiry(&suite.sign(&with(claims(), "exp", json!(now + 600))))
            .unwrap();
        assert_eq!(whole.expires_at, now + 600, "{}", suite.name);
        assert_eq!(whole.principal.subject, "alice");
        // RFC 7519 NumericDate may be fractional: honoured, rounded down.
        let fractional = with(claims(), "exp", json!(now as f64 + 60.75));
        let verified = suite
            .verifier
            .verify_with_expiry(&suite.sign(&fractional))
            .unwrap();
        assert_eq!(verified.expires_at, now + 60, "{}", suite.name);
        // A fractional exp in the past is expired like an integer one.
        let expired = with(claims(), "exp", json!(now as f64 - 120.5));
        assert_eq!(suite.refuse(&suite.sign(&expired)), JwtError::Expired);
    }
}

#[test]
fn leeway_tolerates_small_skew_and_is_configurable() {
    let now = now();
    // Expired 5 s ago: inside the default 30 s leeway, outside a 0 s one.
    let just_expired = with(claims(), "exp", json!(now - 5));
    let suite = &suites()[0];
    assert!(suite.verifier.verify(&suite.sign(&just_expired)).is_ok());
    let mut strict = AdminVerifierConfig::new(VerifyingKey::Hs256Secret(SECRET.to_vec()));
    strict.leeway = Duration::ZERO;
    let strict = AdminVerifier::new(strict).unwrap();
    assert_eq!(
        strict.verify(&suite.sign(&just_expired)),
        Err(JwtError::Expired)
    );
}

#[test]
fn wrong_issuer_or_audience_is_refused() {
    for suite in suites() {
        let token = suite.sign(&with(claims(), "iss", json!("someone-else")));
        assert_eq!(
            suite.refuse(&token),
            JwtError::WrongIssuer {
                expected: "corkboard".into()
            }
        );
        let token = suite.sign(&with(claims(), "aud", json!("corkboard-board")));
        assert_eq!(
            suite.refuse(&token),
            JwtError::WrongAudience {
                expected: "corkboard-admin".into()
            }
        );
        for missing in ["iss", "aud", "exp", "nbf", "sub", "iat"] {
            let token = suite.sign(&with(claims(), missing, Value::Null));
            let err = suite.refuse(&token);
            assert!(
                matches!(&err, JwtError::BadClaims(m) if m.contains(missing)),
                "{}: without {missing}: {err:?}",
                suite.name
            );
        }
    }
    // A verifier configured for another issuer/audience refuses the defaults.
    let mut config = AdminVerifierConfig::new(VerifyingKey::Hs256Secret(SECRET.to_vec()));
    config.issuer = "corp-idp".into();
    config.audience = "corkboard-prod".into();
    let verifier = AdminVerifier::new(config).unwrap();
    let minter = AdminMinter::new(SigningKey::Hs256Secret(SECRET.to_vec())).unwrap();
    let token = minter
        .mint(
            "alice",
            AdminRole::PlatformAdmin,
            None,
            Duration::from_secs(60),
        )
        .unwrap();
    assert!(matches!(
        verifier.verify(&token),
        Err(JwtError::WrongIssuer { .. })
    ));
    let minter = AdminMinter::with_issuer_audience(
        SigningKey::Hs256Secret(SECRET.to_vec()),
        "corp-idp",
        "corkboard-prod",
    )
    .unwrap();
    let token = minter
        .mint(
            "alice",
            AdminRole::PlatformAdmin,
            None,
            Duration::from_secs(60),
        )
        .unwrap();
    assert!(verifier.verify(&token).unwrap().is_all_tenants());
}

#[test]
fn foreign_signatures_are_refused() {
    for suite in suites() {
        let token =
            jsonwebtoken::encode(&Header::new(suite.algorithm), &claims(), &suite.foreign_key)
                .unwrap();
        assert_eq!(
            suite.refuse(&token),
            JwtError::BadSignature,
            "{}",
            suite.name
        );
    }
}

#[test]
fn alg_none_and_algorithm_confusion_are_refused() {
    let payload = URL_SAFE_NO_PAD.encode(claims().to_string());
    for suite in suites() {
        for header in [
            r#"{"alg":"none","typ":"JWT"}"#,
            r#"{"alg":"None"}"#,
            r#"{"typ":"JWT"}"#,
        ] {
            let header = URL_SAFE_NO_PAD.encode(header);
            for signature in ["", "c2ln"] {
                let token = format!("{header}.{payload}.{signature}");
                assert!(
                    matches!(suite.refuse(&token), JwtError::WrongAlgorithm { .. }),
                    "{}",
                    suite.name
                );
            }
        }
    }
    // The classic confusion: HS256 keyed with the RSA/Ed public key bytes,
    // presented to an RS256/EdDSA verifier.
    let all = suites();
    for (suite, public) in [(&all[1], "rsa_a.pub.pem"), (&all[2], "ed25519_a.pub.pem")] {
        let token = jsonwebtoken::encode(
            &Header::new(Algorithm::HS256),
            &claims(),
            &EncodingKey::from_secret(&key_bytes(public)),
        )
        .unwrap();
        assert_eq!(
            suite.refuse(&token),
            JwtError::WrongAlgorithm {
                expected: suite.name
            }
        );
    }
    // And every algorithm's valid token is refused by the others.
    for signer in &all {
        let token = signer.sign(&claims());
        for verifier in all.iter().filter(|v| v.name != signer.name) {
            assert!(matches!(
                verifier.refuse(&token),
                JwtError::WrongAlgorithm { .. }
            ));
        }
    }
}

#[test]
fn tampered_tokens_are_refused() {
    for suite in suites() {
        let token = suite.sign(&claims());
        let parts: Vec<&str> = token.split('.').collect();
        // Same signature, payload promoted to platform admin of all tenants.
        let forged = with(
            with(claims(), "role", json!("platform-admin")),
            "tenant",
            Value::Null,
        );
        let forged = format!(
            "{}.{}.{}",
            parts[0],
            URL_SAFE_NO_PAD.encode(forged.to_string()),
            parts[2]
        );
        assert_eq!(
            suite.refuse(&forged),
            JwtError::BadSignature,
            "{}",
            suite.name
        );
        // Same payload, another tenant.
        let other_tenant = with(claims(), "tenant", json!("globex"));
        let forged = format!(
            "{}.{}.{}",
            parts[0],
            URL_SAFE_NO_PAD.encode(other_tenant.to_string()),
            parts[2]
        );
        assert_eq!(suite.refuse(&forged), JwtError::BadSignature);
        // A flipped signature byte.
        let mut signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
        signature[0] ^= 1;
        let forged = format!(
            "{}.{}.{}",
            parts[0],
            parts[1],
            URL_SAFE_NO_PAD.encode(signature)
        );
        assert_eq!(suite.refuse(&forged), JwtError::BadSignature);
    }
}

#[test]
fn inconsistent_or_invalid_claims_are_refused() {
    for suite in suites() {
        for role in ["tenant-admin", "viewer"] {
            let token = suite.sign(&with(
                with(claims(), "role", json!(role)),
                "tenant",
                Value::Null,
            ));
            let err = suite.refuse(&token);
            assert!(
                matches!(&err, JwtError::BadClaims(m) if m.contains("requires a tenant")),
                "{role} without tenant: {err:?}"
            );
        }
        let bad = [
            with(claims(), "role", json!("root")),
            with(claims(), "role", Value::Null),
            with(claims(), "tenant", json!("Not A Tenant!")),
            with(claims(), "tenant", json!(42)),
            with(claims(), "sub", json!("")),
            with(claims(), "exp", json!("tomorrow")),
        ];
        for claims in bad {
            let err = suite.refuse(&suite.sign(&claims));
            assert!(matches!(err, JwtError::BadClaims(_)), "{claims}: {err:?}");
        }
    }
}

#[test]
fn missing_and_malformed_tokens_are_refused() {
    let suite = &suites()[0];
    assert_eq!(suite.refuse(""), JwtError::Missing);
    assert_eq!(suite.refuse("   "), JwtError::Missing);
    for garbage in [
        "not-a-jwt",
        "a.b",
        "a.b.c.d",
        "!!!.e30.c2ln",
        "e30.e30.c2ln",
    ] {
        let err = suite.refuse(garbage);
        assert!(
            matches!(
                err,
                JwtError::Malformed(_) | JwtError::WrongAlgorithm { .. }
            ),
            "{garbage}: {err:?}"
        );
    }
    // Correct header, payload that is not base64url JSON.
    let header = URL_SAFE_NO_PAD.encode(r#"{"alg":"HS256","typ":"JWT"}"#);
    let err = suite.refuse(&format!("{header}.%%%.c2ln"));
    assert!(
        matches!(err, JwtError::Malformed(_) | JwtError::BadSignature),
        "{err:?}"
    );
}

#[test]
fn the_minter_refuses_what_the_verifier_would() {
    let minter = AdminMinter::new(SigningKey::Hs256Secret(SECRET.to_vec())).unwrap();
    let hour = Duration::from_secs(3600);
    for role in [AdminRole::TenantAdmin, AdminRole::Viewer] {
        assert!(matches!(
            minter.mint("alice", role, None, hour),
            Err(JwtError::BadClaims(_))
        ));
    }
    assert!(
        minter
            .mint("", AdminRole::PlatformAdmin, None, hour)
            .is_err()
    );
    assert!(
        minter
            .mint("alice", AdminRole::PlatformAdmin, None, Duration::ZERO)
            .is_err()
    );
    // The ttl ends up as exp - iat.
    let token = minter
        .mint("alice", AdminRole::PlatformAdmin, None, hour)
        .unwrap();
    let payload = token.split('.').nth(1).unwrap();
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    assert_eq!(
        claims["exp"].as_u64().unwrap() - claims["iat"].as_u64().unwrap(),
        3600
    );
    assert_eq!(claims["nbf"], claims["iat"]);
    assert!(claims.get("tenant").is_none());
    assert_eq!(claims["role"], "platform-admin");
}

#[test]
fn secret_files_and_key_files_load_or_fail_clearly() {
    let dir = tempfile::tempdir().unwrap();
    // A trailing newline (as `echo` writes) is not part of the secret, for
    // the minter and the verifier alike.
    let path = dir.path().join("secret");
    std::fs::write(&path, [SECRET, b"\n"].concat()).unwrap();
    let verifier = AdminVerifier::new(AdminVerifierConfig::new(
        VerifyingKey::hs256_secret_file(&path).unwrap(),
    ))
    .unwrap();
    let minter = AdminMinter::new(SigningKey::hs256_secret_file(&path).unwrap()).unwrap();
    let token = minter
        .mint(
            "ops",
            AdminRole::PlatformAdmin,
            None,
            Duration::from_secs(60),
        )
        .unwrap();
    assert!(verifier.verify(&token).is_ok());
    let raw = AdminMinter::new(SigningKey::Hs256Secret(SECRET.to_vec())).unwrap();
    let token = raw
        .mint(
            "ops",
            AdminRole::PlatformAdmin,
            None,
            Duration::from_secs(60),
        )
        .unwrap();
    assert!(verifier.verify(&token).is_ok());

    let short = dir.path().join("short");
    std::fs::write(&short, b"too-short\n").unwrap();
    assert!(matches!(
        VerifyingKey::hs256_secret_file(&short),
        Err(JwtError::Config(_))
    ));
    let missing = dir.path().join("missing");
    let err = VerifyingKey::rs256_public_pem_file(&missing).unwrap_err();
    assert!(err.to_string().contains("cannot read key file"), "{err}");
    // A file that is not the expected kind of key.
    let err = AdminVerifier::new(AdminVerifierConfig::new(
        VerifyingKey::rs256_public_pem_file(&key_file("ed25519_a.pub.pem")).unwrap(),
    ))
    .unwrap_err();
    assert!(matches!(err, JwtError::Config(_)), "{err}");
    let err =
        AdminMinter::new(SigningKey::eddsa_private_pem_file(&key_file("rsa_a.key.pem")).unwrap())
            .unwrap_err();
    assert!(matches!(err, JwtError::Config(_)), "{err}");
}
