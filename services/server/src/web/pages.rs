//! The page and its assets, embedded in the binary (no CDN, no build step),
//! and the security headers every web response carries.

use actix_web::http::{StatusCode, header};
use actix_web::middleware::DefaultHeaders;
use actix_web::{HttpResponse, HttpResponseBuilder, web};

/// Scripts and styles only from this origin, no inline code, no framing,
/// no foreign connections: what the page needs and nothing more.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const INDEX_HTML: &str = include_str!("../../assets/index.html");
const APP_JS: &str = include_str!("../../assets/app.js");
const APP_CSS: &str = include_str!("../../assets/app.css");
const FAVICON_SVG: &str = include_str!("../../assets/favicon.svg");

/// The headers of every web response (pages, assets, session endpoints,
/// the event stream).
pub fn security_headers() -> DefaultHeaders {
    DefaultHeaders::new()
        .add((header::CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY))
        .add((header::X_CONTENT_TYPE_OPTIONS, "nosniff"))
        .add((header::REFERRER_POLICY, "no-referrer"))
        .add((header::X_FRAME_OPTIONS, "DENY"))
}

/// Marks a response as never to be cached (it depends on who asks).
pub fn no_store(mut builder: HttpResponseBuilder) -> HttpResponseBuilder {
    builder.insert_header((header::CACHE_CONTROL, "no-store"));
    builder
}

/// `GET /`: the single-page board.
pub(super) async fn index() -> HttpResponse {
    no_store(HttpResponse::Ok())
        .content_type("text/html; charset=utf-8")
        .body(INDEX_HTML)
}

/// `GET /assets/{name}`.
pub(super) async fn asset(name: web::Path<String>) -> HttpResponse {
    let (body, content_type) = match name.as_str() {
        "app.js" => (APP_JS, "text/javascript; charset=utf-8"),
        "app.css" => (APP_CSS, "text/css; charset=utf-8"),
        "favicon.svg" => (FAVICON_SVG, "image/svg+xml"),
        _ => {
            return HttpResponse::NotFound()
                .content_type("text/plain; charset=utf-8")
                .body("no such asset");
        }
    };
    // Revalidated on every load: assets change with the binary, and they
    // are small enough that caching them longer is not worth a stale page.
    HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-cache"))
        .content_type(content_type)
        .body(body)
}

/// A small static page explaining why a sign-in link did not work.
pub(super) fn signin_error_page(status: StatusCode, message: &'static str) -> HttpResponse {
    let body = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
<title>Sign-in link not accepted · Corkboard</title>\
<link rel=\"icon\" href=\"/assets/favicon.svg\"><link rel=\"stylesheet\" href=\"/assets/app.css\"></head>\
<body><main class=\"signin-error\" id=\"main\"><h1>Sign-in link not accepted</h1>\
<p id=\"signin-error-message\">{}</p><p><a href=\"/\">Go to the sign-in page</a></p></main></body></html>\n",
        escape_html(message)
    );
    no_store(HttpResponse::build(status))
        .content_type("text/html; charset=utf-8")
        .body(body)
}

fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ` on<letters>=` anywhere: an inline event handler attribute.
    fn has_event_handler_attribute(html: &str) -> bool {
        html.match_indices(" on").any(|(i, _)| {
            let rest = &html[i + 3..];
            let name_len = rest.bytes().take_while(u8::is_ascii_lowercase).count();
            name_len > 0 && rest[name_len..].trim_start().starts_with('=')
        })
    }

    #[test]
    fn assets_have_no_inline_code_or_remote_references() {
        // The CSP would block them anyway; this keeps the page working.
        assert!(!INDEX_HTML.contains("<script>"), "inline script");
        assert!(!INDEX_HTML.contains(" style="), "inline style");
        assert!(
            !has_event_handler_attribute(INDEX_HTML),
            "inline event handler"
        );
        for (name, text) in [
            ("index.html", INDEX_HTML),
            ("app.js", APP_JS),
            ("app.css", APP_CSS),
        ] {
            assert!(
                !text.contains("http://") && !text.contains("https://"),
                "{name} references another origin"
            );
        }
        assert!(
            !APP_JS.contains(".innerHTML"),
            "app.js must build the DOM from text nodes"
        );
        assert!(!APP_JS.contains("insertAdjacentHTML") && !APP_JS.contains("outerHTML"));
        assert!(has_event_handler_attribute("<img src=x onerror=alert(1)>"));
        assert_eq!(
            escape_html("<a href='x'>&\"</a>"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;&lt;/a&gt;"
        );
    }
}
