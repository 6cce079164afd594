//! In-process tests of the web routes through the whole actix app
//! (`crate::routes`): headers, cookies, CSRF, roles, tenant scoping and
//! the event stream.

use super::*;
use crate::state::AppState;
use actix_web::body::MessageBody;
use actix_web::dev::ServiceResponse;
use actix_web::http::{Method, StatusCode, header};
use actix_web::{App, test};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use corkboard_board::{Author, IssueId, IssueState, NewIssue, Title};
use corkboard_grants::{AdminPrincipal, AdminRole};
use std::time::Duration;

struct Fixture {
    state: AppState,
    web: WebState,
    _dir: tempfile::TempDir,
}

async fn fixture_with(configure: impl FnOnce(&mut Settings)) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let mut settings = Settings {
        data_dir: dir.path().to_owned(),
        ..Settings::default()
    };
    configure(&mut settings);
    let state = AppState::for_tests(settings);
    // The application's own web state: the one its handlers use.
    let web = state.web.clone();
    Fixture {
        state,
        web,
        _dir: dir,
    }
}

async fn fixture() -> Fixture {
    fixture_with(|_| {}).await
}

/// The whole application (every route of `crate::routes`) over a fixture.
macro_rules! app {
    ($f:expr) => {
        test::init_service(
            App::new()
                .app_data(web::Data::new($f.state.clone()))
                .configure(crate::routes),
        )
        .await
    };
}

impl Fixture {
    fn jwt(&self, role: AdminRole, tenant: Option<&str>) -> String {
        let tenant = tenant.map(|t| TenantId::parse(t).unwrap());
        self.state
            .test_minter()
            .mint("alice", role, tenant.as_ref(), Duration::from_secs(600))
            .unwrap()
    }

    /// A session cookie (`name=value`) and its CSRF nonce.
    fn session(&self, role: AdminRole, tenant: Option<&str>) -> (String, String) {
        let admin = AdminPrincipal {
            subject: "alice".into(),
            role,
            tenant: tenant.map(|t| TenantId::parse(t).unwrap()),
        };
        let session = Session::new(&admin, Duration::from_secs(600));
        (
            format!(
                "{}={}",
                session::COOKIE_NAME,
                session.encode(&self.state.session_key)
            ),
            session.csrf,
        )
    }
}

fn header_of(resp: &ServiceResponse, name: header::HeaderName) -> &str {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// Cookie pair (`name=value`) from a `Set-Cookie` header.
fn cookie_pair(set_cookie: &str) -> String {
    set_cookie.split(';').next().unwrap_or("").to_owned()
}

#[actix_rt::test]
async fn pages_and_assets_carry_a_strict_csp() {
    let f = fixture().await;
    let app = app!(f);
    for (path, kind) in [
        ("/", "text/html"),
        ("/assets/app.js", "text/javascript"),
        ("/assets/app.css", "text/css"),
    ] {
        let resp = test::call_service(&app, test::TestRequest::get().uri(path).to_request()).await;
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        assert!(
            header_of(&resp, header::CONTENT_TYPE).starts_with(kind),
            "{path}"
        );
        assert_eq!(
            header_of(&resp, header::CONTENT_SECURITY_POLICY),
            pages::CONTENT_SECURITY_POLICY,
            "{path}"
        );
        assert_eq!(
            header_of(&resp, header::X_CONTENT_TYPE_OPTIONS),
            "nosniff",
            "{path}"
        );
        assert_eq!(
            header_of(&resp, header::REFERRER_POLICY),
            "no-referrer",
            "{path}"
        );
    }
    let resp = test::call_service(
        &app,
        test::TestRequest::get()
            .uri("/assets/../state.rs")
            .to_request(),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    // The API scope still answers its own paths.
    let resp =
        test::call_service(&app, test::TestRequest::get().uri("/v1/nope").to_request()).await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
}

#[actix_rt::test]
async fn a_signin_link_works_once_and_sets_a_strict_http_only_cookie() {
    let f = fixture().await;
    let app = app!(f);
    let link = f.web.create_signin_link("http://127.0.0.1:4891/");
    let path = link
        .strip_prefix("http://127.0.0.1:4891")
        .unwrap()
        .to_owned();
    assert!(path.starts_with("/signin?code="), "{link}");

    let resp = test::call_service(&app, test::TestRequest::get().uri(&path).to_request()).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(header_of(&resp, header::LOCATION), "/");
    let set_cookie = header_of(&resp, header::SET_COOKIE).to_owned();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(
            set_cookie.contains(attribute),
            "{attribute} missing: {set_cookie}"
        );
    }
    assert!(
        !set_cookie.contains("Secure"),
        "plain-HTTP server: {set_cookie}"
    );

    let cookie = cookie_pair(&set_cookie);
    let req = test::TestRequest::get()
        .uri("/web/session")
        .insert_header((header::COOKIE, cookie))
        .to_request();
    let me: serde_json::Value = test::call_and_read_body_json(&app, req).await;
    assert_eq!(me["role"], "platform-admin");
    assert_eq!(me["all_tenants"], true);
    assert_eq!(me["subject"], signin::LOCAL_ADMIN);
    assert!(me["csrf_token"].as_str().unwrap().len() >= 40);

    let again = test::call_service(&app, test::TestRequest::get().uri(&path).to_request()).await;
    assert_eq!(again.status(), StatusCode::GONE);
    assert!(again.headers().get(header::SET_COOKIE).is_none());
    let body = test::read_body(again).await;
    assert!(String::from_utf8_lossy(&body).contains("already been used"));

    let forged = test::call_service(
        &app,
        test::TestRequest::get()
            .uri("/signin?code=forged")
            .to_request(),
    )
    .await;
    assert_eq!(forged.status(), StatusCode::BAD_REQUEST);
}

#[actix_rt::test]
async fn cookies_are_secure_behind_an_https_public_url() {
    let f = fixture_with(|s| s.public_url = Some("https://board.example.com".into())).await;
    let app = app!(f);
    let token = f.jwt(AdminRole::Viewer, Some("acme"));
    let req = test::TestRequest::post()
        .uri("/web/session")
        .set_json(serde_json::json!({ "token": token }))
        .to_request();
    let resp = test::call_service(&app, req).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let set_cookie = header_of(&resp, header::SET_COOKIE);
    assert!(set_cookie.contains("; Secure"), "{set_cookie}");
    assert!(
        set_cookie.contains("HttpOnly") && set_cookie.contains("SameSite=Strict"),
        "{set_cookie}"
    );
}

#[actix_rt::test]
async fn an_admin_jwt_is_exchanged_for_a_session_with_its_role_and_tenant() {
    let f = fixture().await;
    let app = app!(f);
    let token = f.jwt(AdminRole::TenantAdmin, Some("acme"));
    let req = test::TestRequest::post()
        .uri("/web/session")
        .set_json(serde_json::json!({ "token": token }))
        .to_request();
    let resp = test::call_service(&app, req).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let set_cookie = header_of(&resp, header::SET_COOKIE).to_owned();
    let max_age: i64 = set_cookie
        .split("; ")
        .find_map(|a| a.strip_prefix("Max-Age="))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(
        max_age > 0 && max_age <= 600,
        "the session must not outlive the token: {max_age}"
    );
    let body: serde_json::Value = test::read_body_json(resp).await;
    assert_eq!(body["role"], "tenant-admin");
    assert_eq!(body["tenant"], "acme");
    assert_eq!(body["can_manage"], true);

    let cookie = cookie_pair(&set_cookie);
    let req = test::TestRequest::get()
        .uri("/web/tenants")
        .insert_header((header::COOKIE, cookie))
        .to_request();
    let tenants: serde_json::Value = test::call_and_read_body_json(&app, req).await;
    assert_eq!(tenants["tenants"], serde_json::json!(["acme"]));

    for bad in ["not-a-jwt", &format!("{token}x")] {
        let req = test::TestRequest::post()
            .uri("/web/session")
            .set_json(serde_json::json!({ "token": bad }))
            .to_request();
        let resp = test::call_service(&app, req).await;
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
        assert!(resp.headers().get(header::SET_COOKIE).is_none());
        let body = test::read_body(resp).await;
        assert!(
            !String::from_utf8_lossy(&body).contains(bad),
            "errors never echo the token"
        );
    }
}

/// An HS256 admin JWT with exactly these claims, signed with the state's
/// secret (the minter only writes integer times).
fn hs256_with(state: &AppState, claims: &serde_json::Value) -> String {
    use hmac::Mac;
    let secret =
        corkboard_config::read_secret("jwt_secret_file", &state.settings.jwt_secret_path())
            .unwrap();
    let signed = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(r#"{"alg":"HS256","typ":"JWT"}"#),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(&secret).unwrap();
    mac.update(signed.as_bytes());
    format!(
        "{signed}.{}",
        URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
    )
}

#[actix_rt::test]
async fn a_session_from_a_jwt_with_a_fractional_exp_ends_no_later_than_the_jwt() {
    let f = fixture().await;
    let app = app!(f);
    let now = session::now_secs();
    let exp = now as f64 + 60.5;
    let token = hs256_with(
        &f.state,
        &serde_json::json!({
            "sub": "alice",
            "role": "platform-admin",
            "iss": f.state.settings.jwt_issuer,
            "aud": f.state.settings.jwt_audience,
            "iat": now,
            "nbf": now,
            "exp": exp,
        }),
    );
    let req = test::TestRequest::post()
        .uri("/web/session")
        .set_json(serde_json::json!({ "token": token }))
        .to_request();
    let resp = test::call_service(&app, req).await;
    assert_eq!(resp.status(), StatusCode::OK);
    let set_cookie = header_of(&resp, header::SET_COOKIE).to_owned();
    let max_age: i64 = set_cookie
        .split("; ")
        .find_map(|a| a.strip_prefix("Max-Age="))
        .and_then(|v| v.parse().ok())
        .unwrap();
    assert!(
        max_age > 0 && max_age <= 61,
        "the cookie must not outlive the token: Max-Age={max_age}"
    );
    // The signed session itself (what the server checks) ends by `exp`.
    let cookie = cookie_pair(&set_cookie);
    let value = cookie.split_once('=').unwrap().1;
    let session = Session::decode(&f.state.session_key, value, now).unwrap();
    assert!(session.exp as f64 <= exp, "{} > {exp}", session.exp);
}

#[actix_rt::test]
async fn state_changing_cookie_requests_need_the_csrf_token() {
    let f = fixture().await;
    let (cookie, csrf) = f.session(AdminRole::TenantAdmin, Some("acme"));
    let request = |method: Method, csrf: Option<&str>| {
        let mut req = test::TestRequest::default()
            .method(method)
            .uri("/v1/tenants/acme/runs/r1/revoke")
            .insert_header((header::COOKIE, cookie.clone()));
        if let Some(csrf) = csrf {
            req = req.insert_header((session::CSRF_HEADER, csrf));
        }
        req.to_http_request()
    };
    assert!(
        authenticate(&request(Method::GET, None), &f.state).is_ok(),
        "reads need no token"
    );
    let refused = authenticate(&request(Method::POST, None), &f.state).unwrap_err();
    assert_eq!(refused.code(), "forbidden");
    assert!(refused.to_string().contains("X-CSRF-Token"), "{refused}");
    assert!(authenticate(&request(Method::DELETE, Some("wrong")), &f.state).is_err());
    let ok = authenticate(&request(Method::POST, Some(&csrf)), &f.state).unwrap();
    assert_eq!(ok.role, AdminRole::TenantAdmin);

    // A bearer JWT needs no CSRF token, and a bad one is not rescued by a cookie.
    let jwt = f.jwt(AdminRole::Viewer, Some("acme"));
    let bearer = test::TestRequest::post()
        .uri("/v1/tenants/acme/runs/r1/revoke")
        .insert_header((header::AUTHORIZATION, format!("Bearer {jwt}")))
        .to_http_request();
    assert_eq!(
        authenticate(&bearer, &f.state).unwrap().role,
        AdminRole::Viewer
    );
    let both = test::TestRequest::get()
        .uri("/")
        .insert_header((header::AUTHORIZATION, "Bearer nonsense"))
        .insert_header((header::COOKIE, cookie.clone()))
        .to_http_request();
    assert!(authenticate(&both, &f.state).is_err());
    let nothing = test::TestRequest::get().uri("/").to_http_request();
    assert_eq!(
        authenticate(&nothing, &f.state).unwrap_err().code(),
        "unauthenticated"
    );

    // Sign-out is state-changing too.
    let app = app!(f);
    let req = test::TestRequest::post()
        .uri("/web/logout")
        .insert_header((header::COOKIE, cookie.clone()))
        .to_request();
    assert_eq!(
        test::call_service(&app, req).await.status(),
        StatusCode::FORBIDDEN
    );
    let req = test::TestRequest::post()
        .uri("/web/logout")
        .insert_header((header::COOKIE, cookie))
        .insert_header((session::CSRF_HEADER, csrf))
        .to_request();
    let resp = test::call_service(&app, req).await;
    assert_eq!(resp.status(), StatusCode::NO_CONTENT);
    assert!(header_of(&resp, header::SET_COOKIE).contains("Max-Age=0"));
}

#[actix_rt::test]
async fn no_session_and_forged_sessions_are_refused() {
    let f = fixture().await;
    let app = app!(f);
    let resp = test::call_service(
        &app,
        test::TestRequest::get().uri("/web/session").to_request(),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let other_key = Session::new(
        &AdminPrincipal {
            subject: "mallory".into(),
            role: AdminRole::PlatformAdmin,
            tenant: None,
        },
        Duration::from_secs(600),
    )
    .encode(
        &corkboard_mcp::SessionKey::new(b"some other key of thirty-two bytes!!".to_vec()).unwrap(),
    );
    let req = test::TestRequest::get()
        .uri("/v1/tenants/acme/events")
        .insert_header((
            header::COOKIE,
            format!("{}={other_key}", session::COOKIE_NAME),
        ))
        .to_request();
    assert_eq!(
        test::call_service(&app, req).await.status(),
        StatusCode::UNAUTHORIZED
    );
}

/// Reads the next chunk of a streaming body, within a generous deadline.
async fn next_chunk<B: MessageBody + Unpin>(body: &mut B) -> String {
    let chunk = tokio::time::timeout(
        Duration::from_secs(10),
        futures_util::future::poll_fn(|cx| std::pin::Pin::new(&mut *body).poll_next(cx)),
    )
    .await
    .expect("a chunk within the deadline");
    match chunk {
        Some(Ok(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
        Some(Err(_)) => panic!("stream error"),
        None => panic!("stream ended"),
    }
}

#[actix_rt::test]
async fn the_event_stream_delivers_a_tenants_changes_and_only_to_its_readers() {
    let f = fixture().await;
    let app = app!(f);
    let (viewer, _) = f.session(AdminRole::Viewer, Some("acme"));

    let req = test::TestRequest::get()
        .uri("/v1/tenants/globex/events")
        .insert_header((header::COOKIE, viewer.clone()))
        .to_request();
    assert_eq!(
        test::call_service(&app, req).await.status(),
        StatusCode::FORBIDDEN,
        "another tenant"
    );
    let req = test::TestRequest::get()
        .uri("/v1/tenants/acme/events")
        .to_request();
    assert_eq!(
        test::call_service(&app, req).await.status(),
        StatusCode::UNAUTHORIZED
    );

    let req = test::TestRequest::get()
        .uri("/v1/tenants/acme/events")
        .insert_header((header::COOKIE, viewer))
        .to_request();
    let resp = test::call_service(&app, req).await;
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(header_of(&resp, header::CONTENT_TYPE), "text/event-stream");
    assert_eq!(header_of(&resp, header::X_CONTENT_TYPE_OPTIONS), "nosniff");
    let mut body = resp.into_body();
    let hello = next_chunk(&mut body).await;
    assert!(
        hello.starts_with("retry: ") && hello.contains("event: ready\n"),
        "{hello}"
    );

    // A write to another tenant does not show; a write to acme does.
    let author = Author {
        kind: corkboard_board::AuthorKind::Run,
        run: RunId::parse("r1").unwrap(),
        grant: None,
        integrity: corkboard_board::Integrity::Agent,
    };
    let new = || NewIssue::new(Title::parse("<img src=x onerror=alert(1)>").unwrap());
    let elsewhere = f
        .state
        .store
        .create_issue(&TenantId::parse("globex").unwrap(), &author, new(), None)
        .await
        .unwrap();
    f.web.issue_changed(&elsewhere.issue);
    let created = f
        .state
        .store
        .create_issue(&TenantId::parse("acme").unwrap(), &author, new(), None)
        .await
        .unwrap();
    f.web.issue_changed(&created.issue);
    let frame = next_chunk(&mut body).await;
    assert_eq!(
        frame,
        format!(
            "event: issue\ndata: {{\"kind\":\"issue_changed\",\"id\":\"{}\",\"version\":1}}\n\n",
            created.issue.id
        )
    );

    f.web.grants_changed(
        &TenantId::parse("acme").unwrap(),
        Some(&RunId::parse("r1").unwrap()),
    );
    assert!(next_chunk(&mut body).await.starts_with("event: grants\n"));

    // Shutting down ends open streams instead of holding the server up.
    f.web.close();
    let end = tokio::time::timeout(
        Duration::from_secs(10),
        futures_util::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_next(cx)),
    )
    .await
    .expect("the stream ends");
    assert!(end.is_none());
}

#[actix_rt::test]
async fn streams_send_heartbeats_and_end_after_their_maximum_age() {
    let bus = MemoryEvents::new();
    let (_closing, rx) = watch::channel(false);
    let stream = live::sse_stream(
        bus.subscribe(&TenantId::parse("acme").unwrap()),
        rx,
        Duration::from_millis(20),
        Duration::from_millis(200),
    );
    let chunks: Vec<String> = tokio::time::timeout(
        Duration::from_secs(10),
        futures_util::StreamExt::collect::<Vec<_>>(stream),
    )
    .await
    .expect("the stream ends by itself")
    .into_iter()
    .map(|c| String::from_utf8_lossy(&c.unwrap_or_default()).into_owned())
    .collect();
    assert!(chunks[0].contains("event: ready"));
    assert!(
        chunks[1..].iter().all(|c| c == ": heartbeat\n\n"),
        "{chunks:?}"
    );
    assert!(chunks.len() >= 2, "{chunks:?}");
}

#[actix_rt::test]
async fn platform_admins_are_offered_the_tenants_with_active_grants() {
    let f = fixture().await;
    let app = app!(f);
    for tenant in ["globex", "acme"] {
        f.state
            .grants
            .issue(corkboard_grants::GrantRequest {
                tenant: TenantId::parse(tenant).unwrap(),
                run: RunId::parse("r1").unwrap(),
                capabilities: corkboard_board::Capabilities::parse_list(
                    &["issues:read".to_owned()],
                )
                .unwrap(),
                ttl: Duration::from_secs(600),
                created_by: "test".into(),
                budgets: Default::default(),
                min_integrity: None,
            })
            .await
            .unwrap();
    }
    let (cookie, _) = f.session(AdminRole::PlatformAdmin, None);
    let req = test::TestRequest::get()
        .uri("/web/tenants")
        .insert_header((header::COOKIE, cookie))
        .to_request();
    let body: serde_json::Value = test::call_and_read_body_json(&app, req).await;
    assert_eq!(body["tenants"], serde_json::json!(["acme", "globex"]));
    assert_eq!(body["complete"], false);
}

#[actix_rt::test]
async fn an_issue_read_for_the_page_carries_its_markdown_rendered_and_sanitised() {
    let f = fixture().await;
    let app = app!(f);
    let author = Author {
        kind: corkboard_board::AuthorKind::Run,
        run: RunId::parse("r1").unwrap(),
        grant: None,
        integrity: corkboard_board::Integrity::Agent,
    };
    let mut new = NewIssue::new(Title::parse("markdown").unwrap());
    new.body = corkboard_board::Body::parse("**bold** <script>alert(1)</script>").unwrap();
    let acme = TenantId::parse("acme").unwrap();
    let created = f
        .state
        .store
        .create_issue(&acme, &author, new, None)
        .await
        .unwrap();
    let token = f.jwt(AdminRole::Viewer, Some("acme"));
    let get = |query: &str| {
        test::TestRequest::get()
            .uri(&format!(
                "/v1/tenants/acme/issues/{}{query}",
                created.issue.id
            ))
            .insert_header((header::AUTHORIZATION, format!("Bearer {token}")))
            .to_request()
    };
    let plain: serde_json::Value = test::call_and_read_body_json(&app, get("")).await;
    assert!(plain.get("rendered").is_none(), "{plain}");
    let page: serde_json::Value = test::call_and_read_body_json(&app, get("?render=html")).await;
    let body = page["rendered"]["body"].as_str().unwrap();
    assert!(body.contains("<strong>bold</strong>"), "{body}");
    assert!(
        body.contains("&lt;script&gt;") && !body.contains("<script"),
        "{body}"
    );
    let unknown = test::call_service(&app, get("?render=pdf")).await;
    assert_eq!(unknown.status(), StatusCode::UNPROCESSABLE_ENTITY);
}

/// Files `title` in `state` on acme as a run, with `labels`.
async fn file(f: &Fixture, title: &str, state: IssueState, labels: &[&str]) -> Issue {
    let author = Author {
        kind: corkboard_board::AuthorKind::Run,
        run: RunId::parse("r1").unwrap(),
        grant: None,
        integrity: corkboard_board::Integrity::Agent,
    };
    let mut new = NewIssue::new(Title::parse(title).unwrap());
    new.state = state;
    new.labels = corkboard_board::Labels::parse(labels.iter().copied()).unwrap();
    f.state
        .store
        .create_issue(&TenantId::parse("acme").unwrap(), &author, new, None)
        .await
        .unwrap()
        .issue
}

#[actix_rt::test]
async fn board_columns_carry_their_true_totals_and_page_on_their_own() {
    let f = fixture().await;
    let app = app!(f);
    for i in 0..60 {
        let labels: &[&str] = if i % 2 == 0 { &["even"] } else { &[] };
        file(&f, &format!("inbox {i}"), IssueState::Inbox, labels).await;
    }
    for i in 0..3 {
        file(&f, &format!("todo {i}"), IssueState::Todo, &["even"]).await;
    }
    let token = f.jwt(AdminRole::Viewer, Some("acme"));
    let get = |query: String| {
        test::TestRequest::get()
            .uri(&format!("/v1/tenants/acme/board{query}"))
            .insert_header((header::AUTHORIZATION, format!("Bearer {token}")))
            .to_request()
    };
    let board: serde_json::Value = test::call_and_read_body_json(&app, get(String::new())).await;
    let columns = board["columns"].as_array().unwrap();
    let states: Vec<&str> = columns
        .iter()
        .map(|c| c["state"].as_str().unwrap())
        .collect();
    assert_eq!(states, IssueState::names(), "{board}");
    let column = |board: &serde_json::Value, state: &str| {
        board["columns"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["state"] == state)
            .cloned()
            .unwrap()
    };
    let inbox = column(&board, "inbox");
    assert_eq!(
        (inbox["total"].as_u64(), inbox["total_exact"].as_bool()),
        (Some(60), Some(true)),
        "{inbox}"
    );
    assert_eq!(inbox["issues"].as_array().unwrap().len(), 25);
    let todo = column(&board, "todo");
    assert_eq!(todo["total"], 3, "{todo}");
    assert!(todo.get("next_cursor").is_none(), "{todo}");
    assert_eq!(column(&board, "done")["total"], 0);

    // The inbox's next pages, asked for alone: the other columns are not in the answer.
    let mut seen: std::collections::BTreeSet<String> = inbox["issues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect();
    let mut cursor = inbox["next_cursor"].as_str().unwrap().to_owned();
    let mut pages = 1;
    loop {
        let page: serde_json::Value =
            test::call_and_read_body_json(&app, get(format!("?state=inbox&cursor={cursor}"))).await;
        let columns = page["columns"].as_array().unwrap();
        assert_eq!(columns.len(), 1, "{page}");
        assert_eq!(columns[0]["total"], 60, "{page}");
        for issue in columns[0]["issues"].as_array().unwrap() {
            assert_eq!(issue["state"], "inbox");
            assert!(
                seen.insert(issue["id"].as_str().unwrap().to_owned()),
                "repeated {issue}"
            );
        }
        pages += 1;
        match columns[0]["next_cursor"].as_str() {
            Some(next) => cursor = next.to_owned(),
            None => break,
        }
    }
    assert_eq!((seen.len(), pages), (60, 3));

    // Filtered columns count under the filter (through the list, not the loaded page).
    let even: serde_json::Value =
        test::call_and_read_body_json(&app, get("?label=even&limit=10".into())).await;
    let inbox = column(&even, "inbox");
    assert_eq!(
        (
            inbox["total"].as_u64(),
            inbox["issues"].as_array().unwrap().len()
        ),
        (Some(30), 10)
    );
    assert_eq!(column(&even, "todo")["total"], 3);

    // A cursor pages one column; pages are bounded.
    for bad in [
        format!("?cursor={cursor}"),
        "?limit=101".to_owned(),
        "?state=nowhere".to_owned(),
        "?ready=true".to_owned(),
    ] {
        let resp = test::call_service(&app, get(bad.clone())).await;
        assert!(resp.status().is_client_error(), "{bad}: {}", resp.status());
    }
    // Another tenant's board is not readable.
    let resp = test::call_service(
        &app,
        test::TestRequest::get()
            .uri("/v1/tenants/globex/board")
            .insert_header((header::AUTHORIZATION, format!("Bearer {token}")))
            .to_request(),
    )
    .await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
}

#[actix_rt::test]
async fn an_unfiltered_column_total_is_the_stores_count_past_the_list_bound() {
    let f = fixture().await;
    let app = app!(f);
    let over = usize::try_from(board::COUNT_MAX).unwrap() + 5;
    for i in 0..over {
        file(&f, &format!("inbox {i}"), IssueState::Inbox, &["all"]).await;
    }
    let token = f.jwt(AdminRole::Viewer, Some("acme"));
    let get = |query: &str| {
        test::TestRequest::get()
            .uri(&format!(
                "/v1/tenants/acme/board?state=inbox&limit=5{query}"
            ))
            .insert_header((header::AUTHORIZATION, format!("Bearer {token}")))
            .to_request()
    };
    // The board as a whole: the store's grouped counts, exact at any size.
    let whole: serde_json::Value = test::call_and_read_body_json(&app, get("")).await;
    let inbox = &whole["columns"][0];
    assert_eq!(
        (inbox["total"].as_u64(), inbox["total_exact"].as_bool()),
        (Some(over as u64), Some(true)),
        "{inbox}"
    );
    // Under a filter the list is counted up to its bound, and says so.
    let filtered: serde_json::Value = test::call_and_read_body_json(&app, get("&label=all")).await;
    let inbox = &filtered["columns"][0];
    assert_eq!(
        (inbox["total"].as_u64(), inbox["total_exact"].as_bool()),
        (Some(board::COUNT_MAX), Some(false)),
        "{inbox}"
    );
}

#[actix_rt::test]
async fn a_counted_column_stops_at_its_bound_and_says_so() {
    let f = fixture().await;
    for i in 0..12 {
        file(&f, &format!("todo {i}"), IssueState::Todo, &["x"]).await;
    }
    let acme = TenantId::parse("acme").unwrap();
    let filter = corkboard_board::ListQuery::default();
    let count = |max| {
        board::bounded_count(
            f.state.store.as_ref(),
            &acme,
            &filter,
            IssueState::Todo,
            max,
        )
    };
    let at_most = count(5).await.unwrap();
    assert_eq!((at_most.count, at_most.exact), (5, false));
    let all = count(12).await.unwrap();
    assert_eq!((all.count, all.exact), (12, true));
    let more = count(board::COUNT_MAX).await.unwrap();
    assert_eq!((more.count, more.exact), (12, true));
    let empty = board::bounded_count(f.state.store.as_ref(), &acme, &filter, IssueState::Done, 5)
        .await
        .unwrap();
    assert_eq!((empty.count, empty.exact), (0, true));
}

#[actix_rt::test]
async fn an_issue_read_with_related_carries_the_titles_its_relations_name() {
    let f = fixture().await;
    let app = app!(f);
    let acme = TenantId::parse("acme").unwrap();
    let parent = file(&f, "the parent", IssueState::Todo, &[]).await;
    let blocker = file(&f, "the blocker", IssueState::InProgress, &[]).await;
    let author = Author {
        kind: corkboard_board::AuthorKind::Run,
        run: RunId::parse("r1").unwrap(),
        grant: None,
        integrity: corkboard_board::Integrity::Agent,
    };
    let mut new = NewIssue::new(Title::parse("the child").unwrap());
    new.parent = Some(parent.id.clone());
    new.blocked_by = corkboard_board::BlockedBy::parse([blocker.id.clone()]).unwrap();
    let child = f
        .state
        .store
        .create_issue(&acme, &author, new, None)
        .await
        .unwrap()
        .issue;
    let token = f.jwt(AdminRole::Viewer, Some("acme"));
    let get = |id: &IssueId, query: &str| {
        test::TestRequest::get()
            .uri(&format!("/v1/tenants/acme/issues/{id}{query}"))
            .insert_header((header::AUTHORIZATION, format!("Bearer {token}")))
            .to_request()
    };
    let plain: serde_json::Value = test::call_and_read_body_json(&app, get(&child.id, "")).await;
    assert!(plain.get("related").is_none(), "{plain}");
    let view: serde_json::Value =
        test::call_and_read_body_json(&app, get(&child.id, "?related=true&render=html")).await;
    let related = &view["related"];
    assert_eq!(related[parent.id.as_str()]["title"], "the parent", "{view}");
    assert_eq!(
        related[blocker.id.as_str()]["title"],
        "the blocker",
        "{view}"
    );
    assert_eq!(
        related[blocker.id.as_str()]["state"],
        "in_progress",
        "{view}"
    );
    assert!(view["rendered"].is_object(), "{view}");
    // The inverse relations too: the parent names its child, the blocker what it blocks.
    let up: serde_json::Value =
        test::call_and_read_body_json(&app, get(&parent.id, "?related=true")).await;
    assert_eq!(
        up["related"][child.id.as_str()]["title"],
        "the child",
        "{up}"
    );
    let blocks: serde_json::Value =
        test::call_and_read_body_json(&app, get(&blocker.id, "?related=true")).await;
    assert_eq!(
        blocks["related"][child.id.as_str()]["title"],
        "the child",
        "{blocks}"
    );
}
