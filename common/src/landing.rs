//! The HTML landing page at `/`, in the style of Prometheus'
//! exporter-toolkit: the program, its build, and links to its endpoints,
//! so someone who opens the address in a browser finds the metrics.

use crate::build::BUILD;
use crate::http::Reply;
use hyper::StatusCode;
use std::fmt::Write as _;

/// One link of the page: the path and what it serves.
#[derive(Debug, Clone)]
pub struct Link {
    /// Path on this server (escaped on the page).
    pub path: String,
    /// What the endpoint is for.
    pub text: &'static str,
}

impl Link {
    /// A link to `path` described by `text`.
    pub fn new(path: impl Into<String>, text: &'static str) -> Link {
        Link {
            path: path.into(),
            text,
        }
    }
}

/// Escape `s` for HTML text and attribute values (also used by the
/// localizer's status page: one escaper for every page we serve).
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// The page for program `name` (`description` under the title).
pub fn page(name: &str, description: &str, links: &[Link]) -> Reply {
    let mut h = String::with_capacity(2048);
    let name = escape(name);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<title>{name}</title>\n<style>body{{font-family:sans-serif;margin:2em;max-width:50em}}\
code{{background:#eee;padding:0 .2em}}</style>\n</head>\n<body>\n<h1>{name}</h1>\n<p>{}</p>\n<ul>\n",
        escape(description)
    );
    for l in links {
        let p = escape(&l.path);
        let _ = writeln!(h, "<li><a href=\"{p}\">{p}</a>: {}</li>", escape(l.text));
    }
    let _ = write!(
        h,
        "</ul>\n<p>Version <code>{}</code>, revision <code>{}</code>, branch <code>{}</code>, built <code>{}</code>.</p>\n</body>\n</html>\n",
        escape(BUILD.version),
        escape(BUILD.revision),
        escape(BUILD.branch),
        escape(BUILD.build_date)
    );
    Reply::new(StatusCode::OK, "text/html; charset=utf-8", h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_links_every_endpoint_and_escapes() {
        let r = page(
            "demo",
            "a <demo>",
            &[
                Link::new("/metrics", "Metrics"),
                Link::new("/x\"><script>", "odd"),
            ],
        );
        assert_eq!(r.content_type, "text/html; charset=utf-8");
        let body = String::from_utf8(r.body.to_vec()).unwrap();
        assert!(body.contains("<a href=\"/metrics\">/metrics</a>"), "{body}");
        assert!(body.contains("a &lt;demo&gt;"));
        assert!(!body.contains("<script>"));
        assert!(body.contains(BUILD.revision));
    }
}
